/**
 * The rows dsh adds to the completer popup, and how typing filters them.
 *
 * This module holds no DOM or JupyterLab runtime code, so it can be tested on plain Node.
 */

import type { CompletionHandler } from '@jupyterlab/completer';

import type { ISessionCandidate } from './api.js';
import { escapeControls } from './escape.js';
import type { IFileCandidate } from './files.js';
import { fileMention } from './mentions.js';
import type { IVariableCandidate } from './variables.js';

/** What a dsh completion item carries besides the stock fields. */
export interface IDshItemInfo {
  kind: 'cell' | 'variable' | 'session' | 'file' | 'directory';
  /** First line of the row (escaped label or path). */
  title: string;
  /** Second part of the row: `id · cwd · created` for sessions, type and shape for variables, type and first
   * line for cells. */
  detail: string;
  /** Lowercased text the client-side filter searches (id, cwd, label; or the entry name). */
  search: string;
  /** The folder part a file item was listed from (`''` for the notebook's folder). */
  folder?: string;
  sameWorkspace?: boolean;
}

/** A completion item produced by this provider. */
export interface IDshCompletionItem extends CompletionHandler.ICompletionItem {
  dsh: IDshItemInfo;
}

/** True for items made by this provider. */
export function isDshItem(
  item: CompletionHandler.ICompletionItem
): item is IDshCompletionItem {
  const info = (item as Partial<IDshCompletionItem>).dsh;
  return typeof info === 'object' && info !== null && typeof info.title === 'string';
}

function isoDate(epochMs: number): string {
  const date = new Date(epochMs);
  return Number.isFinite(date.getTime()) ? date.toISOString() : String(epochMs);
}

/**
 * The mention to insert: the canonical URI from the server (it carries the real id), with the label's
 * terminal controls made visible, as the notebook's own completer and picker insert it.
 */
export function hostMention(candidate: ISessionCandidate): string {
  const uri = /\]\((dsh-session:[^)\s]*)\)$/.exec(candidate.mention);
  if (uri === null) {
    return candidate.mention;
  }
  const label = escapeControls(candidate.label).replace(/[\\\]]/g, m => '\\' + m);
  return `@[${label}](${uri[1]})`;
}

/** A notebook's file name (`reports/q3.ipynb` gives `q3.ipynb`), as the kernel's lists show it. */
export function notebookName(path: string): string {
  const trimmed = path.replace(/[/\\]+$/, '');
  return trimmed.slice(Math.max(trimmed.lastIndexOf('/'), trimmed.lastIndexOf('\\')) + 1) || trimmed;
}

/**
 * The popup row of a session candidate (TUI layout: id only when it differs from the label).
 */
export function sessionItem(candidate: ISessionCandidate): IDshCompletionItem {
  const title = escapeControls(candidate.label);
  const parts: string[] = [];
  if (candidate.notebook !== undefined) {
    parts.push(escapeControls(notebookName(candidate.notebook)));
  }
  if (candidate.label !== candidate.sessionId) {
    parts.push(escapeControls(candidate.sessionId));
  }
  parts.push(candidate.cwd !== undefined ? escapeControls(candidate.cwd) : '(no cwd)');
  parts.push(isoDate(candidate.createdAt));
  return {
    label: title,
    insertText: hostMention(candidate),
    type: 'session',
    dsh: {
      kind: 'session',
      title,
      detail: parts.join(' · '),
      search: [candidate.sessionId, candidate.cwd ?? '', candidate.label, candidate.notebook ?? '']
        .join('\n')
        .toLowerCase(),
      sameWorkspace: candidate.sameWorkspace
    }
  };
}

/** The popup row of a notebook variable: its name, then its type and shape (`DataFrame 1,000×4`). */
export function variableItem(variable: IVariableCandidate): IDshCompletionItem {
  const title = escapeControls(variable.name);
  return {
    label: title,
    insertText: variable.mention,
    type: 'variable',
    dsh: {
      kind: 'variable',
      title,
      detail: escapeControls(variable.brief),
      search: variable.name.toLowerCase()
    }
  };
}

/** The popup row of a file or folder. */
export function fileItem(file: IFileCandidate): IDshCompletionItem {
  const slash = file.path.replace(/\/$/, '').lastIndexOf('/');
  const name = file.path.slice(slash + 1).replace(/\/$/, '');
  return {
    label: escapeControls(file.path),
    insertText: fileMention(file.path),
    type: file.kind,
    dsh: {
      kind: file.kind,
      title: escapeControls(file.path),
      detail: file.kind === 'directory' ? 'folder' : 'file',
      search: name.toLowerCase(),
      folder: file.path.slice(0, slash + 1)
    }
  };
}

/**
 * The dsh items that still match `typed`, the text from the completion start to the cursor.
 *
 * Cells match on `cell:<id>` and their first line, variables on their name (no spaces), sessions on every word
 * typed, files on their name in the folder typed. Other providers' items are dropped: inside a mention the kernel can only offer unrelated names
 * (IPython answers a bare `@` with every magic) or the same sessions and files again. Copies are
 * returned so that the completer's in-place label escaping never touches the originals.
 */
export function filterDshItems(
  items: CompletionHandler.ICompletionItems,
  typed: string
): CompletionHandler.ICompletionItem[] {
  let text = typed.startsWith('@') ? typed.slice(1) : typed;
  const quoted = text.startsWith('"');
  if (quoted) {
    text = text.slice(1);
  }
  if (quoted ? /["\n]/.test(text) : /[\n@[\]()"]/.test(text)) {
    return []; // the mention was closed: nothing left to offer
  }
  const needle = text.toLowerCase();
  // Session titles hold spaces: every word typed must appear (so "regional sales" finds
  // "Regional sales Q3"); a file name typed without quotes ends at a space.
  const words = needle.split(/\s+/).filter(word => word !== '');
  const spaced = !quoted && /\s/.test(needle);
  const slash = needle.lastIndexOf('/');
  const folder = needle.slice(0, slash + 1);
  const name = needle.slice(slash + 1);
  return items
    .filter(item => {
      if (!isDshItem(item)) {
        return false;
      }
      const info = item.dsh;
      if (info.kind === 'session') {
        return !quoted && words.every(word => info.search.includes(word));
      }
      if (info.kind === 'variable' || info.kind === 'cell') {
        return !quoted && !spaced && info.search.includes(needle);
      }
      return !spaced && (info.folder ?? '').toLowerCase() === folder && info.search.includes(name);
    })
    .map(item => ({ ...item }));
}
