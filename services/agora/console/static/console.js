// The console's only script: keeps an open page current without reloading it.
// - the inbox asks for its rows every few seconds and swaps them in when they changed;
// - an escalation page asks for the escalation's state and says so when it changed;
// - the task board, plans, debates and agents pages swap in their live part when it changed;
// - deadlines count down.
// Everything it shows comes from the console's own pages (server-rendered, escaped) or is set
// as text, never as markup.
"use strict";

(function () {
  const refreshMs = Number(document.body.dataset.refreshMs) || 2000;

  function countdown(element, now) {
    const deadline = Date.parse(element.dataset.deadline);
    if (Number.isNaN(deadline)) return;
    let seconds = Math.round((deadline - now) / 1000);
    if (seconds <= 0) {
      element.textContent = "deadline passed: the default applies";
      element.classList.add("passed");
      return;
    }
    const days = Math.floor(seconds / 86400);
    seconds -= days * 86400;
    const hours = Math.floor(seconds / 3600);
    seconds -= hours * 3600;
    const minutes = Math.floor(seconds / 60);
    seconds -= minutes * 60;
    const parts = [];
    if (days) parts.push(days + " d");
    if (days || hours) parts.push(hours + " h");
    if (days || hours || minutes) parts.push(minutes + " min");
    parts.push(String(seconds).padStart(2, "0") + " s");
    element.textContent = "in " + parts.join(" ");
  }

  function tick() {
    const now = Date.now();
    document.querySelectorAll("[data-deadline]").forEach((el) => countdown(el, now));
  }

  async function refreshInbox(rows, status) {
    try {
      const response = await fetch(rows.dataset.source, { credentials: "same-origin", cache: "no-store" });
      if (response.status === 401) {
        status.textContent = "Signed out: sign in again to see updates.";
        return;
      }
      if (!response.ok) {
        status.textContent = "Updates paused: the console could not reach the escalation service.";
        return;
      }
      const html = await response.text();
      if (html !== rows.dataset.last) {
        rows.dataset.last = html;
        rows.innerHTML = html; // the console's own escaped fragment
        tick();
      }
      status.textContent = "Updates live; last checked " + new Date().toLocaleTimeString() + ".";
    } catch (error) {
      status.textContent = "Updates paused: the console is not answering.";
    }
  }

  async function watchEscalation(marker, banner) {
    try {
      const response = await fetch(marker.dataset.state, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      const state = await response.json();
      if (state.context_digest === marker.dataset.digest) return;
      let text = "This escalation changed since you opened it";
      if (state.status !== marker.dataset.status && state.decided_by) {
        text += ": " + state.status + " (" + state.action + ") by " + state.decided_by;
      }
      banner.textContent = text + ". Reload to see it; a decision made on this page would be refused.";
      banner.hidden = false;
    } catch (error) {
      // the next round tries again
    }
  }

  async function refreshLive(live) {
    try {
      const response = await fetch(window.location.href, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) return;
      // The console's own page, parsed (scripts in it never run) for its live part.
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("live");
      if (fresh && fresh.innerHTML !== live.innerHTML) {
        live.innerHTML = fresh.innerHTML;
        tick();
      }
    } catch (error) {
      // the next round tries again
    }
  }

  // The kinds of a task's events (agora.core.task_events), each a reason to refresh.
  const TASK_EVENTS = ["status", "awarded", "acknowledged", "progress", "award_expired", "outcome"];

  // A page with an event stream refreshes its live part when something happens (the browser
  // resumes a broken stream after the last event it got); without one, or once the stream
  // gives up, it looks again every few seconds.
  function followEvents(live) {
    if (!live.dataset.events || !window.EventSource) return false;
    const source = new EventSource(live.dataset.events);
    for (const kind of TASK_EVENTS) {
      source.addEventListener(kind, () => refreshLive(live));
    }
    source.addEventListener("end", () => {
      source.close();
      refreshLive(live);
    });
    const poll = () => {
      source.close();
      setInterval(() => refreshLive(live), refreshMs * 2);
    };
    source.addEventListener("unavailable", poll);
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) poll(); // refused for good (not a break)
    };
    return true;
  }

  document.addEventListener("DOMContentLoaded", () => {
    tick();
    setInterval(tick, 1000);
    const rows = document.getElementById("inbox-rows");
    const status = document.getElementById("live-status");
    if (rows && status) {
      rows.dataset.last = "";
      setInterval(() => refreshInbox(rows, status), refreshMs);
    }
    const live = document.querySelector("[data-live]");
    if (live && !followEvents(live)) {
      setInterval(() => refreshLive(live), refreshMs * 2);
    }
    const marker = document.getElementById("escalation");
    const banner = document.getElementById("changed-banner");
    if (marker && banner) {
      setInterval(() => watchEscalation(marker, banner), refreshMs);
    }
  });
})();
