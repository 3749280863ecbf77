// The Ottla console's only script: changes sent as JSON with fetch (the admin endpoint
// refuses anything else), the live tail of the Messages page and the Broker page's
// charts. No library, no build step, nothing fetched from anywhere but the broker.
"use strict";

const tokenInput = document.getElementById("admin-token");
if (location.hash.startsWith("#token=")) {
  sessionStorage.setItem("ottla-admin-token", decodeURIComponent(location.hash.slice(7)));
  history.replaceState(null, "", location.pathname + location.search);
}
if (tokenInput) {
  tokenInput.value = sessionStorage.getItem("ottla-admin-token") || "";
  tokenInput.addEventListener("change", () => sessionStorage.setItem("ottla-admin-token", tokenInput.value));
}

function notice(text, isError) {
  const box = document.getElementById("notice");
  box.textContent = text;
  box.className = isError ? "error" : "ok";
}

// A change: JSON body, the admin token if one was typed. Resolves to the parsed answer.
// Same-origin credentials: on a broker with SASL users the browser adds the signed-in
// user's (HTTP Basic), whose ACLs decide the change; a cross-site page still cannot send
// this (JSON needs a preflight the endpoint never approves, and its Origin is refused).
async function send(method, url, body) {
  const headers = {"Content-Type": "application/json"};
  const token = sessionStorage.getItem("ottla-admin-token");
  if (token) headers["Authorization"] = "Bearer " + token;
  const response = await fetch(url, {method, headers, body: body === undefined ? undefined : JSON.stringify(body),
                                     credentials: "same-origin"});
  let answer = {};
  try { answer = await response.json(); } catch (e) { /* not JSON */ }
  if (!response.ok) {
    notice(`${method} refused (${response.status}): ${answer.error || response.statusText}`, true);
    throw new Error(answer.error || String(response.status));
  }
  return answer;
}

const createTopic = document.getElementById("create-topic");
if (createTopic) {
  createTopic.addEventListener("submit", async (event) => {
    event.preventDefault();
    const form = new FormData(createTopic);
    const configs = {};
    for (const item of String(form.get("configs") || "").split(",")) {
      const [key, ...rest] = item.split("=");
      if (key.trim()) configs[key.trim()] = rest.join("=").trim();
    }
    const name = String(form.get("name")).trim();
    await send("POST", "/console/topics", {name, partitions: Number(form.get("partitions") || 1), configs});
    location.href = "/console/topic?name=" + encodeURIComponent(name);
  });
}

for (const button of document.querySelectorAll("[data-delete-topic]")) {
  button.addEventListener("click", async () => {
    const name = button.dataset.deleteTopic;
    if (!confirm(`Delete topic ${name} and all its records?`)) return;
    await send("DELETE", "/console/topics/" + encodeURIComponent(name));
    location.href = "/console/topics";
  });
}

const addFault = document.getElementById("add-fault");
if (addFault) {
  addFault.addEventListener("submit", async (event) => {
    event.preventDefault();
    const spec = {};
    for (const [key, value] of new FormData(addFault)) {
      if (value === "") continue;
      spec[key] = ["partition", "count", "delay_ms"].includes(key) ? Number(value) : value;
    }
    await send("POST", "/faults", spec);
    location.reload();
  });
}
for (const button of document.querySelectorAll("[data-remove-fault]")) {
  button.addEventListener("click", async () => {
    await send("DELETE", "/faults/" + button.dataset.removeFault);
    location.reload();
  });
}

// Live tail: ask for the rows after the last one shown, once a second.
const tail = document.getElementById("tail");
if (tail) {
  let timer = null;
  let next = new URL(tail.dataset.tail, location.href);
  const body = document.querySelector("#messages tbody");
  const poll = async () => {
    const response = await fetch(next);
    if (!response.ok) return;
    const answer = await response.json();
    if (answer.rows) {
      const empty = body.querySelector("td.empty");
      if (empty) empty.parentElement.remove();
      body.insertAdjacentHTML("beforeend", answer.rows);  // rendered and escaped by the broker
      while (body.rows.length > 2000) body.deleteRow(0);
    }
    next.searchParams.set("offset", answer.next);
  };
  tail.addEventListener("click", () => {
    if (timer === null) {
      timer = setInterval(poll, 1000);
      poll();
      tail.textContent = "stop tail";
      tail.classList.add("on");
    } else {
      clearInterval(timer);
      timer = null;
      tail.textContent = "live tail";
      tail.classList.remove("on");
    }
  });
}

// Charts: the broker's counters polled every 2 s, drawn as rates over the last 2 minutes.
const charts = document.querySelector("[data-stats]");
if (charts) {
  const samples = [];
  const SVG = "http://www.w3.org/2000/svg";
  const human = (n) => n >= 1e6 ? (n / 1e6).toFixed(1) + "M" : n >= 1e3 ? (n / 1e3).toFixed(1) + "k" : n.toFixed(n < 10 ? 1 : 0);
  const draw = () => {
    for (const chart of charts.querySelectorAll(".chart")) {
      const series = chart.dataset.series;
      const rates = [];
      for (let i = 1; i < samples.length; i++) {
        const seconds = (samples[i].t - samples[i - 1].t) / 1000;
        rates.push(Math.max(0, (samples[i].v[series] - samples[i - 1].v[series]) / seconds));
      }
      const width = 240, height = 60, max = Math.max(1, ...rates);
      const svg = document.createElementNS(SVG, "svg");
      svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
      svg.setAttribute("width", width);
      svg.setAttribute("height", height);
      const base = document.createElementNS(SVG, "line");
      for (const [k, v] of [["x1", 0], ["y1", height - 1], ["x2", width], ["y2", height - 1]]) base.setAttribute(k, v);
      svg.appendChild(base);
      // Spread over the width until two minutes of samples fill it, then scroll.
      const step = width / Math.max(1, Math.max(rates.length, 2) - 1);
      const points = rates.map((r, i) => `${i * step},${height - 2 - (r / max) * (height - 4)}`);
      const area = document.createElementNS(SVG, "polygon");
      area.setAttribute("points", rates.length > 1 ? `0,${height - 1} ${points.join(" ")} ${(rates.length - 1) * step},${height - 1}` : "");
      svg.appendChild(area);
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", points.join(" "));
      svg.appendChild(line);
      const label = document.createElement("span");
      label.className = "now";
      label.textContent = rates.length ? human(rates[rates.length - 1]) : "…";
      chart.replaceChildren(svg, label);
    }
  };
  const poll = async () => {
    const response = await fetch(charts.dataset.stats);
    if (!response.ok) return;
    samples.push({t: Date.now(), v: await response.json()});
    if (samples.length > 61) samples.shift();
    draw();
  };
  poll();
  setInterval(poll, 2000);
}
