// The "your site is being built" page: creates a site with the account's key, then draws its four steps from
// the site's event stream. The browser's EventSource reconnects by itself after a dropped connection and sends
// the id of the last event it received as Last-Event-ID; the API then sends every change after that one, so no
// step is missed or drawn twice. The stream is opened with a token cookie for this one stream (HttpOnly, so
// this script never sees it), since an EventSource cannot send the key in a header.
"use strict";

const STEPS = ["metadata", "filesystem", "database", "bootstrap"];
const TERMINAL = new Set(["active", "rolled_back", "deleted"]);
const $ = (selector) => document.querySelector(selector);

function showProblem(text) {
  $("#problem").textContent = text;
  $("#problem").hidden = false;
}

async function problemText(response) {
  try {
    const problem = await response.json();
    return problem.detail || problem.title || `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

// What the page's heading, which is also its title, says in each status but provisioning.
const FAILED = "Your site could not be built";
const HEADLINES = {
  active: "Your site is live",
  rolling_back: FAILED,
  rolled_back: FAILED,
  rollback_failed: FAILED,
  deleting: "Your site is being deleted",
  deleted: "Your site was deleted",
};
// Nothing more happens to the site without someone acting (an operator's retry for rollback_failed): the bar is
// final and the form can build another site.
const SETTLED = new Set(["active", "rolled_back", "rollback_failed", "deleted"]);
const BUILDING = "Your site is being built";

function setHeadline(text) {
  $("#headline").textContent = text;
  document.title = text;
}

function drawBar(percent, settled) {
  const bar = $("#progress .bar");
  // A settled site's bar takes its final width at once: a transition would still show it part filled while the
  // page already says the site is live.
  bar.dataset.settled = String(settled);
  bar.setAttribute("aria-valuenow", String(percent));
  $("#bar-fill").style.width = `${percent}%`;
}

function draw(site) {
  let done = 0;
  for (const step of STEPS) {
    const item = $(`#steps li[data-step="${step}"]`);
    const status = site.steps[step];
    item.dataset.status = status;
    item.querySelector(".state").textContent = status.replace("_", " ");
    if (status === "done") done += 1;
  }
  const settled = SETTLED.has(site.status);
  drawBar(Math.round((done / STEPS.length) * 100), settled);
  setHeadline(HEADLINES[site.status] || BUILDING);
  const final = $("#final");
  final.dataset.status = site.status;
  if (site.status === "active") {
    final.textContent = `${site.domain} is active.`;
  } else if (site.status === "rolled_back" || site.status === "rollback_failed") {
    final.textContent = site.error ? site.error : "The site could not be built.";
  } else if (site.status === "deleted") {
    final.textContent = "The site was deleted.";
  } else {
    final.textContent = "";
  }
  if (settled) formReady(true);
}

// A new build starts from a blank progress section, without reloading the page.
function reset() {
  for (const item of document.querySelectorAll("#steps li")) {
    item.dataset.status = "pending";
    item.querySelector(".state").textContent = "pending";
  }
  drawBar(0, true);
  setHeadline(BUILDING);
  $("#final").dataset.status = "";
  $("#final").textContent = "";
  $("#events").replaceChildren();
}

function formReady(ready) {
  $("#create button").disabled = !ready;
}

function logEvent(id, site) {
  const item = document.createElement("li");
  item.dataset.eventId = id;
  item.textContent = `#${id} ${site.status}: ${STEPS.map((step) => `${step} ${site.steps[step]}`).join(", ")}`;
  $("#events").append(item);
}

function setConnection(state, text) {
  document.body.dataset.connection = state;
  $("#connection").textContent = text;
}

// The stream of the site this page follows now; a new build closes the previous one's.
let following = null;

function watch(siteId) {
  const source = new EventSource(`/sites/${siteId}/events`);
  following = source;
  source.onopen = () => {
    document.body.dataset.opens = String(Number(document.body.dataset.opens) + 1);
    setConnection("open", "Connected: following the build live.");
  };
  source.onmessage = (event) => {
    const site = JSON.parse(event.data);
    logEvent(event.lastEventId, site);
    draw(site);
    if (TERMINAL.has(site.status)) {
      source.close();
      setConnection("closed", "Finished.");
    }
  };
  // The token expired or the key was revoked: reconnecting with the same cookie would be refused.
  source.addEventListener("credentials-ended", (event) => {
    source.close();
    setConnection("closed", `Stopped: ${JSON.parse(event.data).reason}; reload to follow again.`);
    formReady(true);
  });
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      setConnection("failed", "The connection was refused; reload to try again.");
      formReady(true);
    } else {
      setConnection("reconnecting", "Connection lost: reconnecting, without losing a step…");
    }
  };
}

async function create(event) {
  event.preventDefault();
  const form = event.target;
  const fields = new FormData(form);
  const auth = { Authorization: `Bearer ${fields.get("api_key")}` };
  $("#problem").hidden = true;
  formReady(false);
  const created = await fetch("/sites", {
    method: "POST",
    headers: { ...auth, "Content-Type": "application/json" },
    body: JSON.stringify({ name: fields.get("name"), tagline: fields.get("tagline"), domain: fields.get("domain") }),
  });
  if (!created.ok) {
    formReady(true);
    return showProblem(await problemText(created));
  }
  const site = await created.json();
  // Sets the HttpOnly cookie that opens this site's stream, and only that one.
  const token = await fetch(`/sites/${site.id}/events/token`, { method: "POST", headers: auth });
  if (!token.ok) {
    formReady(true);
    return showProblem(await problemText(token));
  }
  following?.close();
  reset();
  $("#progress").hidden = false;
  watch(site.id);
}

$("#create").addEventListener("submit", create);
