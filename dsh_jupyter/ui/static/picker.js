// Mention picker (anywidget view). Filtering happens in Python: every keystroke invokes the
// "search_command" command, aborting the previous request; responses carry a sequence number and
// only the newest one is shown. The "search message bodies" checkbox (model trait "body") is sent
// with every search. All text is set with textContent, never parsed as HTML.

const ONE_LINE_CONTROLS = /[\u0000-\u001f\u007f-\u009f]/g;
const TIMEOUT_MS = 10000;

/** Terminal controls to literal \xNN (line feed included: labels, ids and cwds are one line). The kernel
 * sends each row's fields already as shown (row.shown: dsh_jupyter/escape.py, hidden characters
 * marked); this guards the raw fallbacks and error texts. */
function escapeControls(text) {
  return String(text).replace(ONE_LINE_CONTROLS, (c) => "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"));
}

function node(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined) element.textContent = text;
  return element;
}

function formatCreated(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "";
  const date = new Date(ms);
  return Number.isNaN(date.getTime()) ? "" : date.toLocaleString();
}

function newViewId() {
  if (globalThis.crypto && typeof globalThis.crypto.randomUUID === "function") return globalThis.crypto.randomUUID();
  return "view-" + Math.random().toString(36).slice(2) + Date.now().toString(36);
}

function render({ model, el, experimental }) {
  const root = node("div", "dsh-picker");
  root.setAttribute("data-lm-suppress-shortcuts", "true");  // keys stay in the picker (see prompt.js)
  for (const type of ["keydown", "keyup", "keypress"]) root.addEventListener(type, (event) => event.stopPropagation());
  const input = node("input", "dsh-picker-input");
  input.type = "search";
  input.setAttribute("role", "combobox");
  input.setAttribute("aria-autocomplete", "list");
  input.setAttribute("aria-label", "Search sessions");
  input.placeholder = model.get("placeholder");
  input.value = model.get("query");
  const toggle = node("label", "dsh-picker-body");
  const bodyBox = node("input", "dsh-picker-body-toggle");
  bodyBox.type = "checkbox";
  bodyBox.checked = model.get("body") === true;
  toggle.title = "Also find sessions whose prompts or answers contain every word (never tool output)";
  toggle.append(bodyBox, node("span", "", " search message bodies"));
  const list = node("ul", "dsh-picker-list");
  list.setAttribute("role", "listbox");
  const status = node("div", "dsh-picker-status");
  status.setAttribute("aria-live", "polite");
  root.append(input, toggle, list, status);
  el.append(root);

  const viewId = newViewId();
  let seq = 0;
  let controller = null;
  let rows = [];
  let active = -1;
  let disposed = false;

  function setStatus(text, level) {
    status.textContent = text;
    status.dataset.level = level || "info";
  }

  function highlight(index) {
    active = rows.length ? Math.max(0, Math.min(index, rows.length - 1)) : -1;
    const items = list.children;
    for (let i = 0; i < items.length; i++) {
      const on = i === active;
      items[i].classList.toggle("dsh-active", on);
      items[i].setAttribute("aria-selected", on ? "true" : "false");
      if (on && typeof items[i].scrollIntoView === "function") items[i].scrollIntoView({ block: "nearest" });
    }
  }

  function renderRows() {
    list.replaceChildren();
    rows.forEach((row, index) => {
      const item = node("li", "dsh-picker-row");
      item.setAttribute("role", "option");
      // The kernel sends each field as shown (row.shown: controls escaped, hidden characters marked).
      const shown = row.shown || {};
      const label = typeof row.label === "string" ? row.label : row.sessionId;
      const head = node("div", "dsh-picker-head");
      head.append(node("span", "dsh-picker-label", escapeControls(shown.label ?? label)));
      if (row.sameWorkspace === true) {
        const mark = node("span", "dsh-picker-same", "✓ same workspace");
        mark.title = "Started in the same folder as this notebook's session";
        head.append(mark);
      }
      const detail = node("div", "dsh-picker-detail");
      const parts = [];
      if (label !== row.sessionId) parts.push(escapeControls(shown.sessionId ?? row.sessionId));
      const cwd = shown.cwd ?? row.cwd;
      parts.push(typeof cwd === "string" ? escapeControls(cwd) : "(no cwd)");
      const created = formatCreated(row.createdAt);
      if (created) parts.push(created);
      detail.textContent = parts.join(" · ");
      item.append(head, detail);
      item.addEventListener("mousedown", (event) => event.preventDefault());
      item.addEventListener("click", () => choose(index));
      item.addEventListener("mouseenter", () => highlight(index));
      list.append(item);
    });
    highlight(rows.length ? 0 : -1);
  }

  async function search(query) {
    seq += 1;
    const mine = seq;
    if (controller) controller.abort();
    const own = new AbortController();
    controller = own;
    const timer = setTimeout(() => own.abort(), TIMEOUT_MS);
    setStatus("Searching…");
    try {
      const [response] = await experimental.invoke(
        "search_command",
        { query, seq: mine, view: viewId, body: bodyBox.checked },
        { signal: own.signal },
      );
      if (disposed || mine !== seq || !response || response.stale) return;
      if (response.error) {
        rows = [];
        renderRows();
        setStatus(escapeControls(response.error), "error");
        return;
      }
      rows = Array.isArray(response.results) ? response.results : [];
      renderRows();
      setStatus(rows.length ? "" : query ? "No session matches." : "No other sessions yet.");
    } catch (error) {
      if (disposed || mine !== seq) return; // superseded by a newer keystroke
      setStatus("The kernel did not answer (is a cell still running?). Type to try again.", "error");
    } finally {
      clearTimeout(timer);
      if (controller === own) controller = null;
    }
  }

  async function choose(index) {
    const row = rows[index];
    if (!row) return;
    try {
      const [response] = await experimental.invoke("choose_command", { sessionId: row.sessionId, index });
      if (disposed) return;
      if (response && response.error) setStatus(escapeControls(response.error), "error");
      else {
        const label = (row.shown && row.shown.label) ?? (typeof row.label === "string" ? row.label : row.sessionId);
        setStatus("Inserted " + escapeControls(label));
      }
    } catch (error) {
      if (!disposed) setStatus("The kernel did not answer; the mention was not inserted.", "error");
    }
  }

  function onInput() {
    model.set("query", input.value);
    model.save_changes();
    search(input.value);
  }

  function onKeyDown(event) {
    if (event.key === "ArrowDown") {
      event.preventDefault();
      highlight(active + 1);
    } else if (event.key === "ArrowUp") {
      event.preventDefault();
      highlight(active - 1);
    } else if (event.key === "Enter") {
      event.preventDefault();
      if (active >= 0) choose(active);
    } else if (event.key === "Escape" && input.value !== "") {
      event.preventDefault();
      input.value = "";
      onInput();
    }
  }

  function onQueryChanged() {
    const query = model.get("query");
    if (query !== input.value) {
      input.value = query;
      search(query);
    }
  }

  function onRevision() {
    search(input.value);
  }

  function onPlaceholder() {
    input.placeholder = model.get("placeholder");
  }

  function onToggle() {
    model.set("body", bodyBox.checked);
    model.save_changes();
    search(input.value);
  }

  function onBodyChanged() {
    const body = model.get("body") === true;
    if (body !== bodyBox.checked) {
      bodyBox.checked = body;
      search(input.value);
    }
  }

  input.addEventListener("input", onInput);
  input.addEventListener("keydown", onKeyDown);
  bodyBox.addEventListener("change", onToggle);
  model.on("change:query", onQueryChanged);
  model.on("change:_revision", onRevision);
  model.on("change:placeholder", onPlaceholder);
  model.on("change:body", onBodyChanged);
  search(input.value);

  return () => {
    disposed = true;
    if (controller) controller.abort();
    model.off("change:query", onQueryChanged);
    model.off("change:_revision", onRevision);
    model.off("change:placeholder", onPlaceholder);
    model.off("change:body", onBodyChanged);
  };
}

export default { render };
