/* Search on a site opened from disk (file://). Browsers start no Web Worker from a file://
   page, and Material runs its search in one, so this stands in for `Worker` there only: the
   worker's script runs in a hidden same-origin iframe, and messages pass as events between
   the two windows. The search index comes as search/search_index.js, which
   docs_hooks/sessiongen_site.py writes beside search_index.json (Material loads it on file://).
   Served over HTTP nothing changes. Loaded before Material's bundle (mkdocs.yml extra.polyfills). */
(() => {
  if (location.protocol !== "file:") return;

  class FileWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.pending = [];
      this.ready = false;
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      this.frame.setAttribute("aria-hidden", "true");
      (document.body || document.documentElement).appendChild(this.frame);
      const scope = this.frame.contentWindow;
      scope.postMessage = (data) => this.receive(data); // what the worker answers
      scope.importScripts = () => {
        throw new Error("importScripts: not available to a worker on file://");
      };
      const script = scope.document.createElement("script");
      script.src = new URL(url, location.href).href;
      script.onload = () => {
        this.ready = true;
        for (const data of this.pending.splice(0)) this.postMessage(data);
      };
      script.onerror = () => this.dispatchEvent(new Event("error"));
      scope.document.head.appendChild(script);
      this.scope = scope;
    }

    receive(data) {
      const event = new MessageEvent("message", { data });
      this.dispatchEvent(event);
      if (typeof this.onmessage === "function") this.onmessage(event);
    }

    postMessage(data) {
      if (!this.ready) {
        this.pending.push(data);
        return;
      }
      this.scope.dispatchEvent(new this.scope.MessageEvent("message", { data }));
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.Worker = FileWorker;
})();
