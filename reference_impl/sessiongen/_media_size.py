"""Sizes read from media bytes headers, without decoding the media (no Pillow): the pixel
dimensions of a PNG, JPEG, GIF or WebP image, the page count of a PDF, the duration of a WAV,
MP3 or MP4/MOV file. The token counter (`sessiongen.tokens`) turns these into the token counts
the providers document.

Only the header is read, so a base64 value cut after its header still answers: the recorded
request set keeps just the first characters of long media. Every reader returns None when
the bytes are not of its format or are too short to say.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct

__all__ = [
    "audio_seconds",
    "decode_base64_prefix",
    "image_size",
    "pdf_pages",
    "video_seconds",
]


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]*")


def decode_base64_prefix(data: str) -> bytes:
    """The bytes of a base64 (standard or URL-safe) string, or of as much of it as decodes: a
    `data:` URL prefix, whitespace, a cut-off tail and anything after the base64 (a marker
    left where the value was cut) are tolerated."""
    text = data.split(",", 1)[1] if data.startswith("data:") and "," in data else data
    text = re.sub(r"\s+", "", text).replace("-", "+").replace("_", "/")
    text = text[: _BASE64_RUN.match(text).end()]  # type: ignore[union-attr]  # always matches
    if len(text) % 4 == 1:  # a cut-off tail: one character is no byte
        text = text[:-1]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=False)
    except (binascii.Error, ValueError):
        pass
    try:  # a tail cut mid-quantum whose last bits are not zero: its whole quanta only
        return base64.b64decode(text[: len(text) - len(text) % 4], validate=False)
    except (binascii.Error, ValueError):
        return b""


def _png(data: bytes) -> tuple[int, int] | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR" or len(data) < 24:
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _gif(data: bytes) -> tuple[int, int] | None:
    if data[:6] not in (b"GIF87a", b"GIF89a") or len(data) < 10:
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return int(width), int(height)


_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(data: bytes) -> tuple[int, int] | None:
    if data[:2] != b"\xff\xd8":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            i += 1  # between segments only fill bytes are expected; resynchronise
            continue
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2  # markers without a length
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if marker in _SOF:
            if i + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(width), int(height)
        if marker == 0xDA:  # start of scan before any frame header: not a valid file
            return None
        i += 2 + length
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP" or len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return int(width) & 0x3FFF, int(height) & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) in pixels of a PNG, JPEG, GIF or WebP image, from its header."""
    for reader in (_png, _jpeg, _gif, _webp):
        size = reader(data)
        if size is not None:
            return size
    return None


_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b")


def pdf_pages(data: bytes) -> int | None:
    """The page count of a PDF: its page objects (`/Type /Page`), or else the largest
    `/Count` of a page tree node; a PDF whose bytes given hold neither (a prefix of the file)
    counts one page. None for what is not a PDF."""
    if not data.startswith(b"%PDF"):
        return None
    pages = len(_PAGE.findall(data))
    if pages:
        return pages
    counts = [int(a or b) for a, b in _COUNT.findall(data)]
    return max(counts) if counts else 1


_STREAMED_SIZE = 0xFFFFFFFF  # a WAV written while recording: its sizes are left unset


def _wav_seconds(data: bytes, total_size: int) -> float | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    i, byte_rate = 12, 0
    while i + 8 <= len(data):
        chunk, size = data[i : i + 4], int.from_bytes(data[i + 4 : i + 8], "little")
        if chunk == b"fmt " and i + 16 <= len(data):
            byte_rate = int.from_bytes(data[i + 16 : i + 20], "little")
        elif chunk == b"data":
            if size == _STREAMED_SIZE:  # the samples run to the end of the file
                size = max(0, total_size - (i + 8))
            return size / byte_rate if byte_rate else None
        i += 8 + size + (size & 1)
    return None


_MP3_KBPS = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)


def _mp3_seconds(data: bytes, total_size: int) -> float | None:
    start = 0
    if data[:3] == b"ID3" and len(data) >= 10:
        start = 10 + ((data[6] << 21) | (data[7] << 14) | (data[8] << 7) | data[9])
    for i in range(start, min(len(data) - 3, start + 4096)):
        if data[i] == 0xFF and data[i + 1] & 0xE0 == 0xE0:
            index = data[i + 2] >> 4
            if 0 < index < len(_MP3_KBPS):
                return (total_size - start) * 8 / (_MP3_KBPS[index] * 1000)
    return None


def audio_seconds(data: bytes, total_size: int | None = None) -> float | None:
    """Seconds of a WAV (its byte rate and data chunk) or MP3 (its first frame's bit rate
    over the file size, `total_size` when the bytes given are only a prefix)."""
    size = total_size if total_size is not None else len(data)
    wav = _wav_seconds(data, size)
    if wav is not None:
        return wav
    return _mp3_seconds(data, size)


def video_seconds(data: bytes) -> float | None:
    """Seconds of an MP4 / MOV file, from the `mvhd` box of its `moov` (None when the `moov`
    is not among the bytes given)."""
    at = data.find(b"mvhd")
    if at < 4:
        return None
    version = data[at + 4] if at + 4 < len(data) else None
    if version == 1 and at + 36 <= len(data):
        timescale = int.from_bytes(data[at + 24 : at + 28], "big")
        duration = int.from_bytes(data[at + 28 : at + 36], "big")
    elif version == 0 and at + 24 <= len(data):
        timescale = int.from_bytes(data[at + 16 : at + 20], "big")
        duration = int.from_bytes(data[at + 20 : at + 24], "big")
    else:
        return None
    return duration / timescale if timescale else None
