/**
 * Path-only file candidates in a notebook's folder, listed through the Contents API (never read).
 */

import { PathExt } from '@jupyterlab/coreutils';
import { Contents } from '@jupyterlab/services';

/** One file or folder a prompt may mention, relative to the notebook's folder. */
export interface IFileCandidate {
  /** Path relative to the notebook's folder; folders end with `/`. */
  path: string;
  kind: 'file' | 'directory';
}

/**
 * Files and folders matching `query` (text typed after `@`) in the folder `cwd`.
 *
 * The part of `query` up to its last `/` picks the folder to list (inside `cwd`); the rest filters
 * entry names case-insensitively, names starting with it first. Hidden entries show only when the
 * filter itself starts with a dot. At most `limit` entries, folders before files within each group.
 */
export async function listFileCandidates(
  contents: Contents.IManager,
  cwd: string,
  query: string,
  limit = 100
): Promise<IFileCandidate[]> {
  const slash = query.lastIndexOf('/');
  const dirPart = slash >= 0 ? query.slice(0, slash + 1) : '';
  const needle = (slash >= 0 ? query.slice(slash + 1) : query).toLowerCase();
  if (dirPart.split('/').includes('..') || dirPart.startsWith('/')) {
    return [];
  }
  const folder = PathExt.join(cwd, dirPart);
  let listing: Contents.IModel;
  try {
    listing = await contents.get(folder, { content: true });
  } catch {
    return [];
  }
  if (listing.type !== 'directory' || !Array.isArray(listing.content)) {
    return [];
  }
  const entries = (listing.content as Contents.IModel[]).filter(entry => {
    const name = entry.name.toLowerCase();
    if (name.startsWith('.') && !needle.startsWith('.')) {
      return false;
    }
    return needle === '' || name.includes(needle);
  });
  const rank = (entry: Contents.IModel): number =>
    (entry.name.toLowerCase().startsWith(needle) ? 0 : 2) +
    (entry.type === 'directory' ? 0 : 1);
  entries.sort(
    (a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name)
  );
  return entries.slice(0, limit).map(entry => ({
    path: dirPart + entry.name + (entry.type === 'directory' ? '/' : ''),
    kind: entry.type === 'directory' ? 'directory' : 'file'
  }));
}
