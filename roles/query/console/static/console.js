// lake console: the little script it has. Pages work without it.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Ctrl+Enter (or Cmd+Enter) in the SQL editor runs the statement.
  var q = document.getElementById("q");
  if (q) {
    q.addEventListener("keydown", function (e) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        q.form.requestSubmit();
      }
    });
  }
});
