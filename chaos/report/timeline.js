// The timeline's zoom: shapes are drawn in milliseconds of the run; this
// maps the span in view [v0, v1] onto the plot's width, draws the axis and
// the labels that fit, and keeps the overview's window in step.
(function () {
  "use strict";
  var plot = document.getElementById("plot"), box = plot.parentNode;
  var over = document.getElementById("overview");
  var END = parseFloat(plot.getAttribute("data-end")) || 1;
  var NS = plot.namespaceURI;
  var v0 = 0, v1 = END;
  var items = [];
  document.querySelectorAll("#z rect, #z circle").forEach(function (el) {
    var c = el.tagName === "circle";
    var cl = el.getAttribute("class") || "";
    items.push({
      el: el, circle: c,
      x: parseFloat(el.getAttribute(c ? "cx" : "x")),
      w: c ? 0 : parseFloat(el.getAttribute("width")),
      min: /\b(vio|box|fault|band)\b/.test(cl) ? 2 : 1,
      label: el.getAttribute("data-l"),
      lclass: /\bfault\b/.test(cl) ? "faultlabel" : /\bband\b/.test(cl) ? "bandlabel" : "holdlabel",
      y: parseFloat(el.getAttribute("y")), h: parseFloat(el.getAttribute("height"))
    });
  });
  var ticks = document.getElementById("ticks"), labels = document.getElementById("labels");
  var brush = over.querySelector(".brush"), sel = over.querySelector(".sel");

  function fmt(ms, step) {
    if (step >= 1000 || v1 >= 1000) return (ms / 1000).toFixed(Math.max(0, -Math.floor(Math.log10(step / 1000)))) + "s";
    if (step >= 1) return ms.toFixed(Math.max(0, -Math.floor(Math.log10(step)))) + "ms";
    return (ms * 1000).toFixed(0) + "µs";
  }
  function niceStep(min) {
    var p = Math.pow(10, Math.floor(Math.log10(min)));
    for (var m of [1, 2, 5, 10]) if (p * m >= min) return p * m;
    return p * 10;
  }
  function text(parent, cls, x, y, s) {
    var t = document.createElementNS(NS, "text");
    t.setAttribute("class", cls); t.setAttribute("x", x); t.setAttribute("y", y);
    t.textContent = s; parent.appendChild(t); return t;
  }
  function render() {
    var W = box.clientWidth, k = W / (v1 - v0), H = parseFloat(plot.getAttribute("height"));
    plot.setAttribute("width", W);
    ticks.textContent = ""; labels.textContent = "";
    var step = niceStep((v1 - v0) * 100 / W);
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var x = (t - v0) * k, l = document.createElementNS(NS, "line");
      l.setAttribute("class", "tick"); l.setAttribute("x1", x); l.setAttribute("x2", x);
      l.setAttribute("y1", 18); l.setAttribute("y2", H); ticks.appendChild(l);
      if (x < W - 40) text(ticks, "axis", x + 2, 13, fmt(t, step)); // not cut off at the right
    }
    var shown = 0;
    items.forEach(function (it) {
      var x = (it.x - v0) * k;
      if (it.circle) { it.el.setAttribute("cx", x); return; }
      var w = Math.max(it.w * k, it.min);
      it.el.setAttribute("x", x); it.el.setAttribute("width", w);
      if (it.label && x + w > 0 && x < W && shown < 4000) {
        var lx = Math.max(x, 0) + 3, room = Math.min(x + w, W) - lx;
        if (it.label.length * 6.5 + 1 <= room) {
          var ly = it.lclass === "bandlabel" ? it.y + 9 : it.y + it.h - 4;
          text(labels, it.lclass, lx, ly, it.label); shown++;
        }
      }
    });
    brush.setAttribute("x", v0); brush.setAttribute("width", v1 - v0);
  }
  var pending = false;
  function view(a, b) {
    var span = Math.min(Math.max(b - a, Math.min(END, 0.01)), END);
    var c = (a + b) / 2;
    // The view may reach half of itself past either end, so that any
    // moment can be put in its middle.
    a = Math.min(Math.max(c - span / 2, -span / 2), END - span / 2);
    v0 = a; v1 = a + span;
    if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; render(); }); }
  }
  function zoom(f, at) { view(at - (at - v0) * f, at + (v1 - at) * f); }
  function pan(d) { view(v0 + d, v1 + d); }
  function timeAt(e) { var r = box.getBoundingClientRect(); return v0 + (e.clientX - r.left) / r.width * (v1 - v0); }

  box.addEventListener("wheel", function (e) {
    e.preventDefault();
    var span = v1 - v0;
    if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan((e.deltaX || e.deltaY) / box.clientWidth * span);
    else zoom(Math.exp(e.deltaY * 0.002), timeAt(e));
  }, { passive: false });
  var drag = null;
  box.addEventListener("mousedown", function (e) { drag = { x: e.clientX, v0: v0, v1: v1 }; box.focus(); });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var d = (drag.x - e.clientX) / box.clientWidth * (drag.v1 - drag.v0);
    view(drag.v0 + d, drag.v1 + d);
  });
  window.addEventListener("mouseup", function () { drag = null; });
  document.addEventListener("keydown", function (e) {
    if (e.target.tagName === "INPUT") return;
    var span = v1 - v0, c = (v0 + v1) / 2;
    switch (e.key) {
      case "+": case "=": zoom(0.5, c); break;
      case "-": case "_": zoom(2, c); break;
      case "ArrowLeft": pan(-span / 5); break;
      case "ArrowRight": pan(span / 5); break;
      case "0": case "Home": view(0, END); break;
      default: return;
    }
    e.preventDefault();
  });

  // The overview: a click centres the view there, a drag picks the span.
  function overTime(e) { var r = over.getBoundingClientRect(); return Math.min(Math.max((e.clientX - r.left) / r.width, 0), 1) * END; }
  var odrag = null;
  over.addEventListener("mousedown", function (e) { odrag = { x: e.clientX, t: overTime(e) }; e.preventDefault(); });
  window.addEventListener("mousemove", function (e) {
    if (!odrag) return;
    var t = overTime(e);
    sel.setAttribute("x", Math.min(t, odrag.t)); sel.setAttribute("width", Math.abs(t - odrag.t));
  });
  window.addEventListener("mouseup", function (e) {
    if (!odrag) return;
    var t = overTime(e), d = odrag;
    odrag = null; sel.setAttribute("width", 0);
    if (Math.abs(e.clientX - d.x) > 3) { view(Math.min(t, d.t), Math.max(t, d.t)); return; }
    var span = v1 - v0 >= END ? END / 10 : v1 - v0;
    view(t - span / 2, t + span / 2);
  });
  var oticks = document.getElementById("oticks"), ostep = niceStep(END / 10);
  for (var t = 0; t <= END; t += ostep) {
    var s = document.createElement("span");
    s.style.left = (t / END * 100) + "%"; s.textContent = fmt(t, ostep); oticks.appendChild(s);
    if (t === 0) s.style.transform = "none"; // not cut off at the left edge
  }

  // An incident's link puts its moment in the middle of the view.
  document.querySelectorAll("a.incident").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      // The first violation in the middle, the whole incident in view, and
      // at least a hundredth of the run, for the holds around it.
      var t0 = parseFloat(a.getAttribute("data-t0")), t1 = parseFloat(a.getAttribute("data-t1"));
      var c = parseFloat(a.getAttribute("data-c"));
      var half = Math.max(c - t0, t1 - c, END / 200) * 1.5;
      view(c - half, c + half);
      var el = document.getElementById(a.getAttribute("href").slice(1));
      requestAnimationFrame(function () {
        if (!el) return;
        el.scrollIntoView({ block: "center", inline: "nearest" });
        el.classList.remove("flash"); void el.getBBox(); el.classList.add("flash");
      });
    });
  });
  window.addEventListener("resize", function () { view(v0, v1); });
  render();
})();
