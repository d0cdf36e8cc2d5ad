/* Avibe inspector: live updates of the timeline (server-sent events) and the context plot (uPlot).
   No build step; plain browser JavaScript. */
"use strict";
window.AvibeInspector = (function () {
  const api = { plot: null, received: 0 };

  function liveTimeline() {
    const list = document.getElementById("timeline");
    if (!list || !list.dataset.stream || !window.EventSource) return;
    const source = new EventSource(list.dataset.stream);
    const badge = document.getElementById("live");
    source.addEventListener("open", () => { if (badge) badge.hidden = false; });
    source.addEventListener("error", () => { if (badge) badge.hidden = true; });
    source.addEventListener("entry", (message) => {
      const data = JSON.parse(message.data);
      if (document.getElementById("e" + data.seq)) return;
      const empty = list.querySelector(".empty");
      if (empty) empty.remove();
      list.insertAdjacentHTML("beforeend", data.html);
      const added = document.getElementById("e" + data.seq);
      if (added) added.classList.add("new");
      api.received += 1;
    });
    api.source = source;
  }

  function markerPlugin(marks) {
    return {
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          for (const mark of marks) {
            const x = u.valToPos(mark.after + 0.5, "x", true);
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
            ctx.strokeStyle = mark.kind === "checkpoint" ? "#7b3fbf" : "#c0392b";
            ctx.lineWidth = 2 * devicePixelRatio;
            ctx.setLineDash(mark.kind === "checkpoint" ? [] : [6 * devicePixelRatio, 4 * devicePixelRatio]);
            ctx.beginPath();
            ctx.moveTo(x, u.bbox.top);
            ctx.lineTo(x, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.fillStyle = ctx.strokeStyle;
            ctx.font = `${11 * devicePixelRatio}px sans-serif`;
            ctx.fillText((mark.kind === "checkpoint" ? "#" : "move-out #") + mark.number, x + 4, u.bbox.top + 12 * devicePixelRatio);
          }
          ctx.restore();
        }],
      },
    };
  }

  function describe(point, timeline) {
    const share = point.prompt ? Math.round(100 * point.cached / point.prompt) : 0;
    return `<b>request ${point.n}</b> (step ${point.step}) at ${point.at}: view <b>${point.view}</b> tokens; ` +
      `provider: ${point.prompt} prompt tokens, ${point.cached} from the prompt cache (${share}%), ` +
      `${point.output} output; ${point.tools} tool call(s); ${point.seconds}s; ` +
      `<a href="${timeline}?after=${Math.max(0, point.seq - 1)}#e${point.seq}">record up to #${point.seq}</a>`;
  }

  function contextPlot(timeline) {
    const holder = document.getElementById("plot");
    const data = JSON.parse(document.getElementById("context-data").textContent);
    if (!holder || !data.points.length) return;
    const xs = data.points.map((p) => p.n);
    const same = (v) => xs.map(() => v || null);
    const series = [
      {},
      { label: "view tokens", stroke: "#1f6feb", width: 2, points: { show: true, size: 7, fill: "#1f6feb" } },
      { label: "from prompt cache", stroke: "#2da44e", fill: "rgba(45,164,78,0.15)", points: { show: false } },
      { label: "checkpoint trigger", stroke: "#d29922", dash: [8, 4], points: { show: false } },
      { label: "window", stroke: "#cf222e", dash: [2, 3], points: { show: false } },
    ];
    const opts = {
      width: Math.max(480, holder.clientWidth || 900),
      height: 380,
      scales: { x: { time: false } },
      axes: [{ label: "model request", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] },
        { label: "tokens", size: 70 }],
      series,
      plugins: [markerPlugin(data.marks)],
      hooks: {
        setCursor: [(u) => {
          const i = u.cursor.idx;
          if (i == null) return;
          document.getElementById("point").innerHTML = describe(data.points[i], timeline);
        }],
      },
    };
    const columns = [xs, data.points.map((p) => p.view), data.points.map((p) => p.cached),
      same(data.threshold), same(data.window)];
    api.plot = new uPlot(opts, columns, holder);
    api.data = data;
  }

  // The plot starts from here, not from a script in the page: the Content-Security-Policy allows no
  // inline script.
  function startPlot() {
    const data = document.getElementById("context-data");
    if (data && data.dataset.timeline) contextPlot(data.dataset.timeline);
  }

  api.contextPlot = contextPlot;
  document.addEventListener("DOMContentLoaded", liveTimeline);
  document.addEventListener("DOMContentLoaded", startPlot);
  return api;
})();
