/**
 * DOM helpers shared by the anywidget views (chat, picker, prompt, approval).
 *
 * Text is set with `textContent` only, through `textElement` of `../escape.ts`; nothing is parsed as HTML.
 */

import { textElement } from '../escape.js';

/** An element with an optional class and text (the text set with `textContent`). */
export function node<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  return textElement(tag, text, className);
}

/** Set `element`'s text only when it changed (keeps the selection and avoids needless layout). */
export function setText(element: Node, text: string): void {
  if (element.textContent !== text) {
    element.textContent = text;
  }
}

/** The key events a widget keeps to itself. */
const KEY_EVENTS = ['keydown', 'keyup', 'keypress'] as const;

/** Keep a key event inside the widget: the notebook must not run, move or edit cells meanwhile. */
export function keepKeys(event: Event): void {
  event.stopPropagation();
}

/**
 * Keys typed in `root` stay there: JupyterLab and Notebook 7 skip elements marked
 * `data-lm-suppress-shortcuts`, and the events also stop at the widget, for frontends that listen on the
 * document.
 */
export function keepKeysInside(root: HTMLElement): void {
  root.setAttribute('data-lm-suppress-shortcuts', 'true');
  for (const type of KEY_EVENTS) {
    root.addEventListener(type, keepKeys);
  }
}

/** The part of an anywidget model that events are subscribed on. */
export interface IEvented {
  on(eventName: string, callback: () => void): void;
  off(eventName?: string | null, callback?: (() => void) | null): void;
}

/**
 * Subscribe each handler to its model events (`{ 'change:items': render, ... }`, or several events for one
 * handler as `[['change:busy', 'change:title'], render]`); the returned function unsubscribes them all,
 * for the view's disposer.
 */
export function subscribe(
  model: IEvented,
  subscriptions: ReadonlyArray<readonly [events: string | readonly string[], handler: () => void]>
): () => void {
  const pairs = subscriptions.flatMap(([events, handler]) =>
    (typeof events === 'string' ? [events] : events).map(event => [event, handler] as const)
  );
  for (const [event, handler] of pairs) {
    model.on(event, handler);
  }
  return () => {
    for (const [event, handler] of pairs) {
      model.off(event, handler);
    }
  };
}
