"""sessiongen: a durable agent Session engine and session.generate on a shared preparation seam."""
