// Follows an enrollment live: reads its status every second and updates the page (the QR
// code, the verification code form, expiry, the result) without a reload.
(function () {
  "use strict";
  var root = document.getElementById("enrollment");
  if (!root) { return; }
  var statusURL = root.getAttribute("data-status-url");
  var qrURL = root.getAttribute("data-qr-url");
  var el = function (id) { return document.getElementById(id); };
  var shownQR = false;
  var expiresAt = null;

  function tickExpiry() {
    if (!expiresAt) { return; }
    var left = Math.max(0, Math.round((expiresAt - Date.now()) / 1000));
    el("expires-in").textContent = "(in " + Math.floor(left / 60) + "m " + (left % 60) + "s)";
  }

  function show(st) {
    el("status").textContent = st.status;
    if (st.expires_at && !st.done) {
      expiresAt = Date.parse(st.expires_at);
      el("expires-at").textContent = new Date(expiresAt).toLocaleTimeString();
      el("expiry").hidden = false;
      tickExpiry();
    } else {
      el("expiry").hidden = true;
    }
    if (st.qr && !shownQR) {
      el("qr").src = qrURL + "?t=" + Date.now();
      shownQR = true;
    }
    el("qr-box").hidden = !st.qr;
    var form = el("code-form");
    if (st.needs_code && form.hidden) {
      form.hidden = false;
      el("code").value = "";
      el("code").focus();
    } else if (!st.needs_code) {
      form.hidden = true;
    }
    if (st.done) {
      el("cancel-form").hidden = true;
      var text = el("result-text");
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
  }

  function poll() {
    fetch(statusURL, { credentials: "same-origin", cache: "no-store", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (r.status === 401) { window.location.reload(); throw new Error("logged out"); }
        if (!r.ok) { throw new Error("status " + r.status); }
        return r.json();
      })
      .then(function (st) {
        show(st);
        if (!st.done) { setTimeout(poll, 1000); }
      })
      .catch(function () { setTimeout(poll, 3000); });
  }

  setInterval(tickExpiry, 1000);
  if (root.getAttribute("data-done") !== "true") { poll(); }
})();
