// The approvals page. Every name shown comes from an agent and may be
// hostile: text goes in with textContent only, never as markup, and the
// Content-Security-Policy runs no script but this file.
"use strict";

const KEY = "pincer-approvals-token";

// A token in the fragment (`/#token=...`) is taken and removed from the
// address bar at once; fragments are never sent to the server or its logs.
function tokenFromFragment() {
  const match = /^#token=(.+)$/.exec(window.location.hash);
  if (match) {
    sessionStorage.setItem(KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
}

function token() {
  return sessionStorage.getItem(KEY) || "";
}

function say(text) {
  document.getElementById("status").textContent = text;
}

function cell(row, text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) {
    td.className = className;
  }
  row.appendChild(td);
  return td;
}

function button(parent, label, action) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  b.addEventListener("click", action);
  parent.appendChild(b);
}

async function api(path, body) {
  const options = { headers: { Authorization: "Bearer " + token() }, cache: "no-store" };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const answer = await response.json();
  if (!response.ok) {
    throw new Error(answer.error || ("HTTP " + response.status));
  }
  return answer;
}

async function decide(id, decision) {
  try {
    const answer = await api("/api/decide", { id: id, decision: decision });
    say(answer.message);
  } catch (error) {
    say("not decided: " + error.message);
  }
  refresh();
}

function render(requests) {
  const rows = document.getElementById("rows");
  rows.replaceChildren();
  for (const pending of requests) {
    const r = pending.request;
    const row = document.createElement("tr");
    row.dataset.id = String(pending.id);
    if (!pending.waiting) {
      row.className = "gone";
    }
    cell(row, String(pending.id));
    cell(row, pending.node);
    cell(row, r.mission);
    cell(row, r.comm + " (pid " + r.pid + ")");
    cell(row, r.path, "path");
    cell(row, r.operation.join(", "));
    cell(row, r.hook);
    cell(row, pending.age_seconds + " s" + (pending.waiting ? "" : ", node not waiting"));
    cell(row, r.owner_only ? "yes: " + r.owner_only : "");
    const actions = cell(row, "");
    button(actions, "allow once", () =>
      decide(pending.id, { vote: "allow", lifetime: { kind: "once" }, extent: "file" }));
    button(actions, "allow session", () =>
      decide(pending.id, { vote: "allow", lifetime: { kind: "session" }, extent: "file" }));
    button(actions, "deny", () => decide(pending.id, { vote: "deny" }));
    rows.appendChild(row);
  }
}

async function refresh() {
  if (!token()) {
    say("enter the operator token");
    return;
  }
  try {
    const answer = await api("/api/pending");
    render(answer.requests);
    if (answer.requests.length === 0) {
      say("no request is waiting");
    } else {
      say(answer.requests.length + " request(s) waiting");
    }
  } catch (error) {
    say("cannot list: " + error.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  tokenFromFragment();
  document.getElementById("login").addEventListener("submit", (event) => {
    event.preventDefault();
    const field = document.getElementById("token");
    sessionStorage.setItem(KEY, field.value);
    field.value = "";
    refresh();
  });
  refresh();
  setInterval(refresh, 3000);
});
