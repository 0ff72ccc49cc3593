// Follows an enrollment live (the operator's page and the owner's): reads its status every
// second and updates the page without a reload: the status in plain words, what to do
// next, the QR code (a new image when the enrollment replaced an expired one) and how
// long it stays scannable, the verification code form, the result. When the server
// cannot be reached it says the connection is lost, keeps trying, and recovers by itself.
(function () {
  "use strict";
  var root = document.getElementById("enrollment");
  if (!root) { return; }
  var statusURL = root.getAttribute("data-status-url");
  var qrURL = root.getAttribute("data-qr-url");
  var el = function (id) { return document.getElementById(id); };
  var qr = el("qr");
  var shownSerial = qr ? Number(qr.getAttribute("data-serial") || 0) : 0;
  var expiresAt = null;
  var qrExpiresAt = null;
  var lost = false;

  function left(t) {
    var s = Math.max(0, Math.round((t - Date.now()) / 1000));
    return Math.floor(s / 60) + ":" + ("0" + (s % 60)).slice(-2);
  }

  function tick() {
    if (expiresAt && el("expires-in")) { el("expires-in").textContent = "(in " + left(expiresAt) + ")"; }
    if (qrExpiresAt && el("qr-expires-in")) { el("qr-expires-in").textContent = left(qrExpiresAt); }
  }

  function setHint(st) {
    var h = el("hint");
    h.textContent = st.hint || "";
    h.className = "hint" + (st.problem ? " problem" : "");
  }

  function connection(ok) {
    if (lost === !ok) { return; }
    lost = !ok;
    el("conn").hidden = ok;
    document.body.classList.toggle("offline", !ok);
  }

  function show(st) {
    root.setAttribute("data-status", st.status);
    el("status").textContent = st.text || st.status;
    if (el("status-code")) { el("status-code").textContent = st.status; }
    setHint(st);
    if (el("expiry")) {
      if (st.expires_at && !st.done) {
        expiresAt = Date.parse(st.expires_at);
        el("expires-at").textContent = new Date(expiresAt).toLocaleTimeString();
        el("expiry").hidden = false;
      } else {
        el("expiry").hidden = true;
        expiresAt = null;
      }
    }
    if (st.qr && st.qr_serial !== shownSerial) {
      qr.src = qrURL + "?s=" + st.qr_serial;
      qr.setAttribute("data-serial", String(st.qr_serial));
      shownSerial = st.qr_serial;
    }
    el("qr-box").hidden = !st.qr;
    qrExpiresAt = st.qr && st.qr_expires_at ? Date.parse(st.qr_expires_at) : null;
    el("qr-expiry").setAttribute("data-expires-at", st.qr && st.qr_expires_at ? st.qr_expires_at : "");
    el("qr-expiry").hidden = !qrExpiresAt;
    if (el("qr-refreshes-left")) { el("qr-refreshes-left").textContent = String(st.qr_refreshes_left); }
    tick();
    var form = el("code-form");
    if (st.needs_code && form.hidden) {
      form.hidden = false;
      el("code").value = "";
      el("code").focus();
    } else if (!st.needs_code) {
      form.hidden = true;
    }
    if (st.done) { finish(st); }
  }

  function finish(st) {
    ["cancel-form", "owner"].forEach(function (id) { if (el(id)) { el(id).hidden = true; } });
    if (el("retry-form")) { el("retry-form").hidden = st.status === "confirmed"; }
    var text = el("result-text");
    if (!text) { return; }
    text.textContent = "";
    if (st.status === "confirmed") {
      text.appendChild(document.createTextNode("Enrolled: account "));
      var code = document.createElement("code");
      code.id = "account-key";
      code.textContent = st.account_key;
      text.appendChild(code);
      text.appendChild(document.createTextNode(" (generation " + st.generation + ")"));
    } else {
      text.textContent = "The enrollment ended: " + st.status;
    }
    el("result-error").textContent = st.error || "";
    el("result").hidden = false;
  }

  function poll() {
    fetch(statusURL, { credentials: "same-origin", cache: "no-store", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (r.status === 401) { window.location.reload(); throw new Error("logged out"); }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.json();
      })
      .then(function (st) {
        connection(true);
        show(st);
        if (!st.done) { setTimeout(poll, 1000); }
      })
      .catch(function () {
        connection(false);
        setTimeout(poll, 1000);
      });
  }

  var qe = el("qr-expiry");
  if (qe && qe.getAttribute("data-expires-at")) { qrExpiresAt = Date.parse(qe.getAttribute("data-expires-at")); }
  var ea = el("expires-at");
  if (ea && ea.getAttribute("datetime")) { expiresAt = Date.parse(ea.getAttribute("datetime")); }
  tick();
  setInterval(tick, 1000);
  if (root.getAttribute("data-done") !== "true") { poll(); }
})();
