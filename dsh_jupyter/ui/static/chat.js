// Chat transcript (anywidget view): a header (session title, short id, model, status badge and a
// Stop button while a turn runs) over the synced `items` list, rendered incrementally and keyed by
// item id, so open/closed sections and the scroll position survive the ~20 updates per second of a
// streaming turn. Answers arrive as a document tree that Python parsed from the one sanitiser's HTML
// (`doc`: Markdown's elements only, links and images with allowed targets); they are built with
// createElement and textContent, never parsed as HTML. Reasoning is collapsed by default; tool calls show name and one-line arguments,
// with the result behind a disclosure. Terminal controls are shown as literal \xNN.

const BODY_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;
const LINE_CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;

function hex(c) {
  return "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0");
}

/** Multi-line text: line feed and tab kept, other controls to \xNN. */
function escapeText(text) {
  return String(text ?? "").replace(/\r\n/g, "\n").replace(BODY_CONTROLS, hex);
}

/** One-line fields (labels, ids, tool names): every control to \xNN. */
function escapeLine(text) {
  return String(text ?? "").replace(LINE_CONTROLS, hex);
}

function node(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined) element.textContent = text;
  return element;
}

function setText(element, text) {
  if (element.textContent !== text) element.textContent = text;
}

/** The elements an answer's document tree may hold, and the attributes each keeps (markdown.py's TREE_ATTRIBUTES). */
const DOC_TAGS = {
  p: [], blockquote: [], strong: [], em: [], del: [], code: ["class"], pre: [], br: [], hr: [],
  h1: [], h2: [], h3: [], h4: [], h5: [], h6: [], ul: [], ol: ["start"], li: [], span: [],
  table: [], thead: [], tbody: [], tr: [], th: ["align"], td: ["align"], a: ["href", "title"],
  img: ["src", "alt", "title"],
};
/** A last guard for targets Python already allowed: http, https, mailto or relative (no scheme). */
const SAFE_URL = /^(https?:|mailto:|[^:/?#]*([/?#]|$))/i;

/** Build a document tree (from Python's markdown_tree) into `parent`; unknown tags become plain spans. */
export function buildDoc(parent, children) {
  for (const child of children || []) {
    if (typeof child === "string") {
      parent.append(escapeText(child));
      continue;
    }
    if (!child || typeof child !== "object") continue;
    const allowed = Object.prototype.hasOwnProperty.call(DOC_TAGS, child.tag) ? DOC_TAGS[child.tag] : null;
    const element = document.createElement(allowed ? child.tag : "span");
    for (const name of allowed || []) {
      const value = child.attrs && child.attrs[name];
      if (typeof value !== "string") continue;
      if ((name === "href" || name === "src") && !SAFE_URL.test(value.replace(/[\u0000-\u0020]/g, ""))) continue;
      element.setAttribute(name, value);
    }
    if (child.tag === "a") {
      element.setAttribute("target", "_blank");
      element.setAttribute("rel", "noopener noreferrer");
    }
    buildDoc(element, child.children);
    parent.append(element);
  }
}

const builders = {
  user() {
    const box = node("div", "dsh-chat-item dsh-chat-user");
    const who = node("div", "dsh-chat-who");
    const body = node("div", "dsh-chat-text");
    box.append(who, body);
    const update = (next) => {
      setText(who, next.steered ? "You · steered into running turn" : "You");
      setText(body, escapeText(next.text));
    };
    return { element: box, update };
  },
  assistant() {
    const box = node("div", "dsh-chat-item dsh-chat-assistant");
    const body = node("div", "dsh-chat-markdown jp-RenderedHTMLCommon jp-RenderedMarkdown");
    box.append(body);
    let shown = null;
    const update = (next) => {
      const doc = Array.isArray(next.doc) ? next.doc : [String(next.text ?? "")];
      const key = JSON.stringify(doc);
      if (key !== shown) {
        shown = key;
        body.replaceChildren();
        buildDoc(body, doc);
      }
      box.classList.toggle("dsh-streaming", !!next.streaming);
    };
    return { element: box, update };
  },
  reasoning() {
    const box = node("details", "dsh-chat-item dsh-chat-reasoning");
    const summary = node("summary", "", "Reasoning");
    const body = node("div", "dsh-chat-text");
    box.append(summary, body);
    const update = (next) => {
      setText(summary, next.streaming ? "Reasoning…" : "Reasoning");
      setText(body, escapeText(next.text));
    };
    return { element: box, update };
  },
  tool() {
    const box = node("details", "dsh-chat-item dsh-chat-tool");
    const summary = node("summary");
    const name = node("span", "dsh-chat-tool-name");
    const args = node("span", "dsh-chat-tool-args");
    const state = node("span", "dsh-chat-tool-state");
    summary.append(name, args, state);
    const fullArgs = node("pre", "dsh-chat-tool-full");
    const result = node("pre", "dsh-chat-tool-result");
    box.append(summary, fullArgs, result);
    const update = (next) => {
      setText(name, escapeLine(next.name));
      setText(args, "(" + escapeLine(next.summary) + ")");
      setText(state, next.status === "stopped" ? " stopped" : !next.done ? " running…" : next.isError ? " failed" : "");
      box.classList.toggle("dsh-error", !!next.isError);
      setText(fullArgs, escapeText(next.arguments));
      setText(result, next.done ? escapeText(next.result) : "");
    };
    return { element: box, update };
  },
  context() {
    const box = node("details", "dsh-chat-item dsh-chat-context");
    const summary = node("summary");
    const list = node("ul", "dsh-chat-sources");
    box.append(summary, list);
    const update = (next) => {
      setText(summary, escapeLine(next.summary));
      list.replaceChildren();
      for (const source of next.references || []) {
        const facts = [escapeLine(source.sessionId)];
        if (source.capturedThroughSeq !== null && source.capturedThroughSeq !== undefined) facts.push("through seq " + source.capturedThroughSeq);
        if (source.compacted) facts.push("compacted");
        if (source.truncated) facts.push(`truncated: ${source.omittedMessages ?? 0} messages, ${source.omittedBytes ?? 0} bytes omitted`);
        const row = node("li");
        row.append(node("span", "dsh-chat-source-label", escapeLine(source.label ?? source.sessionId)));
        row.append(node("span", "dsh-chat-source-facts", " · " + facts.join(" · ")));
        list.append(row);
      }
    };
    return { element: box, update };
  },
  notice() {
    const box = node("div", "dsh-chat-item dsh-chat-notice");
    const update = (next) => {
      box.dataset.level = next.level || "info";
      setText(box, escapeText(next.text));
    };
    return { element: box, update };
  },
  end() {
    const box = node("div", "dsh-chat-item dsh-chat-end");
    const update = (next) => {
      box.dataset.reason = next.reason || "";
      setText(box, "Turn " + escapeLine(next.reason) + (next.error ? ": " + escapeText(next.error) : ""));
    };
    return { element: box, update };
  },
};

const WIDGET_MIME = "application/vnd.jupyter.widget-view+json";

/**
 * The panel's output in the notebook document, where the frontend exposes it (JupyterLab and
 * Notebook 7: the widget manager's document context); null elsewhere (VS Code, tests).
 */
function panelOutput(model) {
  const panelId = model.get("panel_id");
  const context = model.widget_manager && model.widget_manager.context;
  const cells = context && context.model && context.model.cells;
  if (!panelId || !cells || typeof cells.get !== "function") return null;
  for (let i = 0; i < cells.length; i++) {
    const outputs = cells.get(i).outputs;
    if (!outputs || typeof outputs.get !== "function") continue;
    for (let j = 0; j < outputs.length; j++) {
      const output = outputs.get(j);
      const view = output && output.data && output.data[WIDGET_MIME];
      if (view && view.model_id === panelId) return { context, outputs, index: j, output };
    }
  }
  return null;
}

/** The copy this view last saw from Python, as the output's fallback MIME types. */
function copyBundle(model) {
  return { "text/html": model.get("copy_html") || "", "text/plain": model.get("copy_text") || "" };
}

/**
 * Keep the saved notebook's copy of the conversation current (the kernel's display updates only
 * reach an output while its cell runs, and re-render it): just before each save, write the copy into
 * the output's data without re-rendering the live widget. Returns a disposer, or null where the
 * frontend does not expose the document (the kernel's display updates then carry the copy).
 */
export function mirrorCopyOnSave(model) {
  const found = panelOutput(model);
  if (!found || !found.context.saveState || typeof found.context.saveState.connect !== "function") return null;
  const onSave = (_sender, state) => {
    if (state !== "started") return;
    const current = panelOutput(model);
    const raw = current && current.output._rawData; // what the document saves; setData would re-render the widget
    if (raw && typeof raw === "object" && model.get("copy_html")) current.output._rawData = { ...raw, ...copyBundle(model) };
  };
  found.context.saveState.connect(onSave);
  return () => found.context.saveState.disconnect(onSave);
}

/**
 * When the kernel behind the widget is gone (restarted or dead), show the conversation in its place:
 * the output becomes the static copy, and the notebook saves that instead of a dead widget.
 */
export function replaceWithCopy(model) {
  const found = panelOutput(model);
  if (!found || !model.get("copy_html") || typeof found.outputs.set !== "function") return false;
  found.outputs.set(found.index, { output_type: "display_data", data: copyBundle(model), metadata: {} });
  return true;
}

function render({ model, el, experimental }) {
  const root = node("div", "dsh-chat");
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  for (const type of ["keydown", "keyup", "keypress"]) root.addEventListener(type, (event) => event.stopPropagation());
  const header = node("div", "dsh-chat-header");
  const heading = node("div", "dsh-chat-heading");
  const title = node("span", "dsh-chat-title");
  const details = node("span", "dsh-chat-details");
  heading.append(title, details);
  const state = node("span", "dsh-chat-state");
  state.setAttribute("aria-live", "polite");
  const stop = node("button", "dsh-chat-stop dsh-button dsh-button-warn jp-Button jp-mod-styled jp-mod-warn", "Stop");
  stop.type = "button";
  stop.title = "Cancel the running turn";
  header.append(heading, state, stop);
  const log = node("div", "dsh-chat-log");
  log.setAttribute("role", "log");
  log.setAttribute("aria-live", "polite");
  const empty = node("div", "dsh-chat-empty", "No messages yet. Type a prompt below and press Ctrl+Enter or Send.");
  root.append(header, log, empty);
  el.append(root);

  const views = new Map(); // item id -> { kind, element, update }
  let disposed = false;
  let stopError = "";

  function renderItems() {
    const nearBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    const items = model.get("items") || [];
    const seen = new Set();
    for (const item of items) {
      const key = String(item.id);
      seen.add(key);
      let view = views.get(key);
      if (!view || view.kind !== item.kind) {
        if (view) view.element.remove();
        const build = builders[item.kind] || builders.notice;
        view = { kind: item.kind, ...build() };
        views.set(key, view);
      }
      view.update(item);
    }
    for (const [key, view] of views) {
      if (!seen.has(key)) {
        view.element.remove();
        views.delete(key);
      }
    }
    // Attach in order (only nodes not already in place move).
    let cursor = log.firstChild;
    for (const item of items) {
      const element = views.get(String(item.id)).element;
      if (element === cursor) {
        cursor = cursor.nextSibling;
      } else {
        log.insertBefore(element, cursor);
      }
    }
    if (nearBottom) log.scrollTop = log.scrollHeight;
    const none = items.length === 0;
    empty.hidden = !none || model.get("variant") === "pick";
    log.hidden = none;
    root.classList.toggle("dsh-chat-unused", none && model.get("variant") === "pick");
    root.classList.toggle("dsh-chat-pick", model.get("variant") === "pick");
  }

  function renderHeader() {
    setText(title, escapeLine(model.get("title") || "New session"));
    setText(details, (model.get("details") || []).map(escapeLine).join(" · "));
    const busy = model.get("busy");
    const status = busy ? "running" : model.get("status") || "idle";
    setText(state, stopError || (status === "running" ? "running…" : status));
    state.dataset.status = stopError ? "error" : status;
    stop.hidden = !busy;
    stop.disabled = !busy;
    if (!busy) stopError = "";
  }

  async function onStop() {
    stop.disabled = true;
    try {
      const [response] = await experimental.invoke("stop_command", {}, { signal: AbortSignal.timeout(10000) });
      if (!disposed && response && response.error) stopError = "Stop failed: " + escapeLine(response.error);
    } catch (error) {
      if (!disposed) stopError = "the kernel did not answer the stop request";
    }
    if (!disposed) renderHeader();
  }

  stop.addEventListener("click", onStop);
  let stopMirror = () => {};
  try {
    const mirror = mirrorCopyOnSave(model);
    if (mirror) {
      stopMirror = mirror;
      // This view keeps the saved copy current: the kernel must not re-render the output to do it
      // (each display update re-creates the panel's views, and a prompt box loses what is typed).
      if (!model.get("mirrored")) {
        model.set("mirrored", true);
        model.save_changes();
      }
    }
  } catch (error) {
    console.warn("dsh: the saved copy of this chat will not be kept current", error);
  }
  let markDirty = null;
  function onCopy() {
    // A finished turn changed the conversation: the document has unsaved changes (its copy).
    if (model.get("busy")) return;
    const found = panelOutput(model);
    if (found && found.context.model) found.context.model.dirty = true;
  }
  async function onCommLive() {
    // ipywidgets marks every model "not live" when the kernel restarts or dies: its objects are gone.
    try {
      await new Promise((resolve) => setTimeout(resolve, 100)); // every model is marked in turn
      const manager = model.widget_manager;
      const panel = manager && (await manager.get_model(model.get("panel_id")));
      if (panel && panel.comm_live === false) replaceWithCopy(model);
    } catch (error) {
      console.warn("dsh: could not show the copy of this chat", error);
    }
  }
  markDirty = onCopy;
  model.on("change:copy_html", markDirty);
  model.on("comm_live_update", onCommLive);
  const headerEvents = ["busy", "title", "details", "status"].map((name) => "change:" + name);
  model.on("change:items", renderItems);
  model.on("change:variant", renderItems);
  for (const event of headerEvents) model.on(event, renderHeader);
  renderHeader();
  renderItems();

  return () => {
    disposed = true;
    stopMirror();
    model.off("change:copy_html", markDirty);
    model.off("comm_live_update", onCommLive);
    model.off("change:items", renderItems);
    model.off("change:variant", renderItems);
    for (const event of headerEvents) model.off(event, renderHeader);
  };
}

export default { render };
