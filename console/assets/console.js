// hookroom console: progressive enhancement only; every page works without it.
(function () {
  "use strict";
  // Rewrite <time datetime> (rendered in UTC) to the operator's time zone.
  function localize(root) {
    var times = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var t = times[i];
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime()) || t.dataset.local === "1") continue;
      t.title = t.textContent;
      t.textContent = d.toLocaleString();
      t.dataset.local = "1";
    }
  }
  document.addEventListener("DOMContentLoaded", function () { localize(document); });
  document.addEventListener("htmx:afterSwap", function (e) { localize(e.target); });
  // A live update answered 401: the session ended; reload to reach sign-in.
  document.addEventListener("htmx:responseError", function (e) {
    if (e.detail && e.detail.xhr && e.detail.xhr.status === 401) window.location.reload();
  });
})();
