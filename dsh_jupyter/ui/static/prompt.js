// Prompt box (anywidget view): a textarea synced to `value`, the caret synced to `cursor`, and a
// Send button (Ctrl/Cmd+Enter) that empties the box and invokes the "send_command" command with the
// text (prompts sent quickly queue up, in order). Python decides whether the prompt starts a turn or
// is steered into the running one; a prompt it refuses comes back into the box. Text is set with textContent only.
// Keys typed here stay here: Enter is a newline, and no key reaches the notebook's shortcuts
// (JupyterLab and Notebook 7 skip elements marked data-lm-suppress-shortcuts; the event also stops
// at the widget, for frontends that listen on the document).

const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g;

function escapeText(text) {
  return String(text).replace(CONTROLS, (c) => "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"));
}

function node(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined) element.textContent = text;
  return element;
}

/** Keep a key event inside the widget: the notebook must not run, move or edit cells meanwhile. */
export function keepKeys(event) {
  event.stopPropagation();
}

function render({ model, el, experimental }) {
  const root = node("div", "dsh-prompt");
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const area = node("textarea", "dsh-prompt-input");
  area.rows = 3;
  area.setAttribute("aria-label", "Prompt");
  const bar = node("div", "dsh-prompt-bar");
  const mac = /Mac|iPhone|iPad/.test(globalThis.navigator?.platform ?? "");
  const hint = node("span", "dsh-prompt-hint", `Enter: new line · ${mac ? "⌘" : "Ctrl"}+Enter: send`);
  const button = node("button", "dsh-prompt-send dsh-button dsh-button-accept jp-Button jp-mod-styled jp-mod-accept");
  button.type = "button";
  const status = node("span", "dsh-prompt-status");
  status.setAttribute("aria-live", "polite");
  bar.append(status, hint, button);
  root.append(area, bar);
  el.append(root);
  for (const type of ["keydown", "keyup", "keypress"]) root.addEventListener(type, keepKeys);

  let pending = 0; // prompts handed to the kernel and not answered yet
  let queue = Promise.resolve(); // they are delivered one after another, in the order sent
  let disposed = false;
  let localError = null; // a failure only this view knows about (no answer, or an error reply)

  function sync() {
    if (area.value !== model.get("value")) area.value = model.get("value");
    area.placeholder = model.get("placeholder");
    const busy = model.get("busy");
    button.textContent = pending ? "Sending…" : busy ? "Steer" : "Send";
    button.title = busy ? "Add this prompt to the running turn" : "Start a turn with this prompt";
    button.disabled = model.get("disabled");
    area.disabled = model.get("disabled");
    status.textContent = escapeText(localError ?? model.get("status"));
    status.dataset.level = localError === null ? model.get("status_level") : "error";
  }

  function caretChanged() {
    const caret = area.selectionStart === area.value.length ? -1 : area.selectionStart;
    if (model.get("cursor") === caret) return false;
    model.set("cursor", caret);
    return true;
  }

  function saveCaret() {
    if (caretChanged()) model.save_changes();
  }

  function placeCaret() {
    const caret = model.get("cursor");
    const position = caret < 0 || caret > area.value.length ? area.value.length : caret;
    if (document.activeElement === area) area.setSelectionRange(position, position);
  }

  function setBox(text) {
    area.value = text;
    model.set("value", text);
    model.set("cursor", -1);
    model.save_changes();
  }

  /** A prompt the kernel did not take goes back in the box, before whatever was typed since. */
  function giveBack(text) {
    if (disposed) return;
    setBox(area.value ? text + "\n" + area.value : text);
  }

  async function deliver(text) {
    try {
      const [response] = await experimental.invoke("send_command", { value: text }, { signal: AbortSignal.timeout(30000) });
      if (response && response.error) {
        localError = String(response.error);
        giveBack(text);
      }
    } catch (error) {
      localError = "The kernel did not answer; your prompt is back in the box.";
      giveBack(text);
    } finally {
      pending -= 1;
      if (!disposed) sync();
    }
  }

  function send() {
    if (model.get("disabled")) return;
    // The box empties here, at once, and the text travels in the command itself: a "value" update
    // still on its way (ipywidgets holds updates back while the kernel is busy) is overtaken by this
    // empty value, so the kernel can never put the text just sent back in the box.
    const text = area.value;
    localError = null;
    pending += 1;
    setBox("");
    sync();
    queue = queue.then(() => deliver(text));
  }

  function onInput() {
    localError = null;
    model.set("value", area.value);
    caretChanged();
    model.save_changes();
  }

  function onKeyDown(event) {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      send();
    }
    // Plain Enter and Shift+Enter insert a newline (the textarea's own behaviour).
  }

  function onValue() {
    sync();
    placeCaret();
  }

  area.addEventListener("input", onInput);
  area.addEventListener("keydown", onKeyDown);
  area.addEventListener("keyup", saveCaret);
  area.addEventListener("click", saveCaret);
  area.addEventListener("blur", saveCaret);
  button.addEventListener("click", send);
  model.on("change:value", onValue);
  function onStatus() {
    localError = null;
    sync();
  }

  const events = ["placeholder", "busy", "status_level", "disabled"].map((name) => "change:" + name);
  for (const event of events) model.on(event, sync);
  model.on("change:status", onStatus);
  sync();

  return () => {
    disposed = true;
    model.off("change:value", onValue);
    for (const event of events) model.off(event, sync);
    model.off("change:status", onStatus);
  };
}

export default { render };
