// The accounts table: copies the page's route forms (one <template>) into each row, and
// keeps the table fresh: every 15 s it reads the same page again and swaps the rows, the
// summary and the pager, unless the operator is busy with the table (a form of it has
// the focus, or one of its menus is open) or the tab is hidden. A message the reread page
// carries (the session's one-shot message) is shown, not lost.
(function () {
  "use strict";
  var list = document.getElementById("accounts");
  if (!list) { return; }
  var template = document.getElementById("route-forms-template");
  var PLACEHOLDER = "__KEY__";
  var EVERY = 15000;

  function prefill(root, selector, value) {
    var el = root.querySelector(selector);
    if (el && value) { el.value = value; }
  }

  // Gives each routable row its route forms (a row the server rendered them in keeps its own).
  function routeForms(root) {
    if (!template) { return; }
    var rows = root.querySelectorAll("li.account");
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      var slot = row.querySelector(".route-slot");
      if (!slot || slot.firstElementChild) { continue; }
      var key = row.getAttribute("data-account");
      var forms = template.content.cloneNode(true);
      var named = forms.querySelectorAll("[action], [id], [for]");
      for (var j = 0; j < named.length; j++) {
        ["action", "id", "for"].forEach(function (attr) {
          var v = named[j].getAttribute(attr);
          if (v && v.indexOf(PLACEHOLDER) >= 0) { named[j].setAttribute(attr, v.split(PLACEHOLDER).join(key)); }
        });
      }
      prefill(forms, "select[name=mcp_agent]", row.getAttribute("data-route-agent"));
      prefill(forms, "select[name=ilink_client]", row.getAttribute("data-route-client"));
      prefill(forms, "input[name=workflow_type]", row.getAttribute("data-route-type"));
      prefill(forms, "input[name=task_queue]", row.getAttribute("data-route-queue"));
      slot.appendChild(forms);
    }
  }

  // busy: the operator is using the table, or nobody sees it.
  function busy() {
    if (document.hidden) { return true; }
    if (list.querySelector("details[open]")) { return true; }
    var active = document.activeElement;
    return !!(active && active !== document.body && list.contains(active) && active.closest("form"));
  }

  function swap(id, fresh) {
    var old = document.getElementById(id);
    var next = fresh.getElementById(id);
    if (!old || !next) { return; }
    old.innerHTML = next.innerHTML;
    old.hidden = next.hidden;
  }

  function showFlash(fresh) {
    var flash = fresh.getElementById("flash");
    if (!flash) { return; }
    var old = document.getElementById("flash");
    var copy = document.importNode(flash, true);
    if (old) {
      old.replaceWith(copy);
    } else {
      var main = document.querySelector("main");
      main.insertBefore(copy, main.firstChild);
    }
  }

  var state = document.getElementById("refresh-state");
  var timer = null;

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, EVERY);
  }

  // data-ticks on the state line counts the refreshes due so far, swapped or not.
  function tick() {
    if (state) { state.setAttribute("data-ticks", String(Number(state.getAttribute("data-ticks") || 0) + 1)); }
  }

  function refresh() {
    tick();
    if (busy()) { schedule(); return; }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store", redirect: "manual",
      headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (r.type === "opaqueredirect" || r.status === 401) {
          // Logged out (or the session ended): stop; the next click goes to the login form.
          if (state) { state.textContent = "Not updating: the session ended. Reload the page to log in again."; }
          throw new Error("logged out");
        }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        showFlash(fresh);
        if (busy()) { schedule(); return; }
        ["accounts-summary", "accounts-range", "accounts", "pager"].forEach(function (id) { swap(id, fresh); });
        routeForms(list);
        if (state) { state.textContent = "Updated at " + new Date().toLocaleTimeString() + "; updates every 15 s while no form or menu of the table is open."; }
        schedule();
      })
      .catch(function (err) {
        if (err && err.message === "logged out") { return; }
        if (state) { state.textContent = "Could not update at " + new Date().toLocaleTimeString() + "; trying again."; }
        schedule();
      });
  }

  routeForms(list);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { schedule(); }
  });
  schedule();
})();
