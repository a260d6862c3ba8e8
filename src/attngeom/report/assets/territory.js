// Live territory map: six draggable bodies, the softmax (dot-product) and Yat-kernel owner maps
// redrawn as they move, with the same formulas as attngeom/laws.py and attngeom/toy.py.
"use strict";
(function () {
  const B0 = Math.log(2);
  const EPS0 = 0.25;
  const RADIUS = 2;
  const BODIES0 = [[0.9, 0.85], [-1.05, 0.6], [0.15, -1.1], [1.35, -0.5], [-0.7, -0.75], [0.35, 0.3]];
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];
  const LAWS = ["dot", "kernel"];

  // Index of the body with the top score at query (qx, qy); the first one wins ties, like argmax.
  function owner(qx, qy, bodies, law, b, eps) {
    let best = 0;
    let bestScore = -Infinity;
    const qq = qx * qx + qy * qy;
    for (let j = 0; j < bodies.length; j++) {
      const kx = bodies[j][0];
      const ky = bodies[j][1];
      const d = qx * kx + qy * ky;
      let s = d;
      if (law === "kernel") {
        const d2 = Math.max(qq + (kx * kx + ky * ky) - 2 * d, 0);
        s = (d + b) * (d + b) / (d2 + eps);
      }
      if (s > bestScore) {
        bestScore = s;
        best = j;
      }
    }
    return best;
  }

  // Owners on the pixel centres of [-radius, radius]^2, row-major from the top (toy.view_grid).
  function ownerGrid(radius, n, bodies, law, b, eps) {
    const out = new Int32Array(n * n);
    for (let row = 0; row < n; row++) {
      const y = ((n - 1 - row + 0.5) / n) * 2 * radius - radius;
      for (let col = 0; col < n; col++) {
        const x = ((col + 0.5) / n) * 2 * radius - radius;
        out[row * n + col] = owner(x, y, bodies, law, b, eps);
      }
    }
    return out;
  }

  function shares(grid, nBodies) {
    const counts = new Array(nBodies).fill(0);
    for (let i = 0; i < grid.length; i++) counts[grid[i]] += 1;
    return counts.map((c) => c / grid.length);
  }

  function rgb(hex, lighten) {
    const v = parseInt(hex.slice(1), 16);
    return [(v >> 16) & 255, (v >> 8) & 255, v & 255].map((c) => Math.round(c + (255 - c) * lighten));
  }

  const state = { bodies: BODIES0.map((p) => p.slice()), b: B0, eps: EPS0, drag: -1, redraws: 0 };

  function toPixel(p, size) {
    return [((p[0] + RADIUS) / (2 * RADIUS)) * size, ((RADIUS - p[1]) / (2 * RADIUS)) * size];
  }

  function toWorld(px, py, size) {
    const clamp = (v) => Math.min(RADIUS, Math.max(-RADIUS, v));
    return [clamp((px / size) * 2 * RADIUS - RADIUS), clamp(RADIUS - (py / size) * 2 * RADIUS)];
  }

  function drawLaw(canvas, law) {
    const n = canvas.width;
    const ctx = canvas.getContext("2d");
    const grid = ownerGrid(RADIUS, n, state.bodies, law, state.b, state.eps);
    const img = ctx.createImageData(n, n);
    const fills = COLORS.map((c) => rgb(c, 0.55));
    for (let i = 0; i < grid.length; i++) {
      const c = fills[grid[i]];
      img.data.set([c[0], c[1], c[2], 255], 4 * i);
    }
    ctx.putImageData(img, 0, 0);
    ctx.strokeStyle = "rgba(0,0,0,0.25)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(n / 2, 0);
    ctx.lineTo(n / 2, n);
    ctx.moveTo(0, n / 2);
    ctx.lineTo(n, n / 2);
    ctx.stroke();
    state.bodies.forEach((p, j) => {
      const [x, y] = toPixel(p, n);
      ctx.beginPath();
      ctx.arc(x, y, 7, 0, 2 * Math.PI);
      ctx.fillStyle = COLORS[j];
      ctx.fill();
      ctx.lineWidth = 2;
      ctx.strokeStyle = "#000";
      ctx.stroke();
      ctx.fillStyle = "#fff";
      ctx.font = "bold 9px sans-serif";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillText(String(j + 1), x, y);
    });
    return shares(grid, state.bodies.length);
  }

  function redraw(root) {
    const result = {};
    LAWS.forEach((law) => {
      result[law] = drawLaw(root.querySelector(`canvas[data-law="${law}"]`), law);
    });
    result.dot.forEach((_, j) => {
      LAWS.forEach((law) => {
        root.querySelector(`[data-share="${law}-${j}"]`).textContent = (100 * result[law][j]).toFixed(1) + " %";
      });
      root.querySelector(`[data-pos="${j}"]`).textContent =
        `(${state.bodies[j][0].toFixed(2)}, ${state.bodies[j][1].toFixed(2)})`;
    });
    root.querySelector("[data-value=b]").textContent = state.b.toFixed(3);
    root.querySelector("[data-value=eps]").textContent = state.eps.toFixed(3);
    state.shares = result;
    state.redraws += 1;
  }

  function eventPoint(canvas, ev) {
    const r = canvas.getBoundingClientRect();
    return [((ev.clientX - r.left) / r.width) * canvas.width, ((ev.clientY - r.top) / r.height) * canvas.height];
  }

  function attach(root) {
    const canvases = root.querySelectorAll("canvas[data-law]");
    let pending = false;
    const schedule = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => {
        pending = false;
        redraw(root);
      });
    };
    canvases.forEach((canvas) => {
      canvas.addEventListener("pointerdown", (ev) => {
        const [px, py] = eventPoint(canvas, ev);
        let best = -1;
        let bestDist = 14;
        state.bodies.forEach((p, j) => {
          const [x, y] = toPixel(p, canvas.width);
          const dist = Math.hypot(x - px, y - py);
          if (dist < bestDist) {
            bestDist = dist;
            best = j;
          }
        });
        if (best < 0) return;
        state.drag = best;
        canvas.setPointerCapture(ev.pointerId);
        ev.preventDefault();
      });
      canvas.addEventListener("pointermove", (ev) => {
        if (state.drag < 0) return;
        const [px, py] = eventPoint(canvas, ev);
        state.bodies[state.drag] = toWorld(px, py, canvas.width);
        schedule();
      });
      const release = () => {
        if (state.drag >= 0) redraw(root);
        state.drag = -1;
      };
      canvas.addEventListener("pointerup", release);
      canvas.addEventListener("pointercancel", release);
    });
    ["b", "eps"].forEach((name) => {
      root.querySelector(`input[name=${name}]`).addEventListener("input", (ev) => {
        state[name] = parseFloat(ev.target.value);
        schedule();
      });
    });
    root.querySelector("button[data-action=reset]").addEventListener("click", () => {
      state.bodies = BODIES0.map((p) => p.slice());
      state.b = B0;
      state.eps = EPS0;
      root.querySelector("input[name=b]").value = B0;
      root.querySelector("input[name=eps]").value = EPS0;
      redraw(root);
    });
    redraw(root);
  }

  window.attngeomTerritory = { owner, ownerGrid, shares, toPixel, state, COLORS, BODIES0, RADIUS };
  document.addEventListener("DOMContentLoaded", () => {
    const root = document.getElementById("territory");
    if (root) attach(root);
  });
})();
