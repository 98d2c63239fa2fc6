/**
 * Display escaping shared by the completion popup and the reference-context renderer.
 *
 * Every string from a session (label, id, cwd, path) is put into the DOM with `textContent`, never as
 * HTML. Terminal control characters are also made visible, the way the Python host shows them in
 * `text/plain`: each C0 control (U+0000–U+001F, line feed included, since these are one-line fields),
 * DEL and each C1 control (U+007F–U+009F) becomes the four characters `\xNN` (lowercase hex).
 */

const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * Replace every C0 control, DEL and C1 control in `text` with its `\xNN` spelling.
 */
export function escapeControls(text: string): string {
  return text.replace(
    CONTROL,
    char => '\\x' + char.charCodeAt(0).toString(16).padStart(2, '0')
  );
}

/**
 * A one-line, control-free display form of any value that should have been a string.
 */
export function displayText(value: unknown): string {
  if (typeof value === 'string') {
    return escapeControls(value);
  }
  if (value === null || value === undefined) {
    return '';
  }
  return escapeControls(String(value));
}

/**
 * Create an element whose text is `text`, set through `textContent` (never parsed as HTML).
 */
export function textElement<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text: string,
  className?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.textContent = text;
  if (className) {
    node.className = className;
  }
  return node;
}
