// occd-lean: every file the plugin reads or writes (the policy occd writes; the counts and the sticky state the
// plugin writes), handled so that nothing put at those names can stall OpenClaw's gateway (issue 31.1, 31.2):
// - read: opened with O_NONBLOCK | O_NOFOLLOW (a FIFO or a device never blocks the open, a symbolic link is
//   refused), then fstat'ed: only a regular file is read, at most MAX_BYTES (a larger one is refused unread);
// - written: a temp file beside the target, created exclusively (O_EXCL | O_NOFOLLOW: never through a link, never
//   an existing file) under a name nobody can predict (crypto.randomBytes), fsync, rename; the temp file is removed
//   on any failure; a target that exists and is not a regular file is left alone (refused);
// - a time budget per operation: a read over it is abandoned (between chunks), and a file whose read or write took
//   longer is left alone for COOL_DOWN_MS, so a slow disk costs one turn, not every turn.
// A refusal throws Refused; the engine then passes OpenClaw's history unchanged (fail open) and logs one line.

import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

export const MAX_BYTES = 16 * 1024 * 1024;
export const BUDGET_MS = 250;
export const COOL_DOWN_MS = 60_000;
const CHUNK = 1024 * 1024;
const C = fs.constants;
const READ_FLAGS = C.O_RDONLY | (C.O_NONBLOCK ?? 0) | (C.O_NOFOLLOW ?? 0);
const TEMP_FLAGS = C.O_WRONLY | C.O_CREAT | C.O_EXCL | (C.O_NOFOLLOW ?? 0);

export class Refused extends Error {
  constructor(file, why) {
    super(`${file} refused: ${why}`);
    this.name = "Refused";
    this.code = "EREFUSED";
    this.file = file;
    this.why = why;
  }
}

const slowUntil = new Map(); // file -> the time its cool-down ends

function coolDown(file, now) {
  const until = slowUntil.get(file);
  if (until === undefined) return;
  if (now < until) throw new Refused(file, "too slow a moment ago, left alone for a while");
  slowUntil.delete(file);
}

function overBudget(file, t0, budgetMs, clock) {
  if (clock() - t0 <= budgetMs) return false;
  slowUntil.set(file, clock() + COOL_DOWN_MS);
  return true;
}

function kind(st) {
  if (st.isFIFO()) return "a FIFO";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  if (st.isDirectory()) return "a directory";
  if (st.isSymbolicLink()) return "a symbolic link";
  if (st.isSocket()) return "a socket";
  return "not a regular file";
}

/** A cheap signature of `file` without opening it (lstat: a link is not followed); null when there is none. */
export function signature(file) {
  let st;
  try {
    st = fs.lstatSync(file);
  } catch (e) {
    if (e?.code === "ENOENT" || e?.code === "ENOTDIR") return null;
    throw new Refused(file, e?.code ?? String(e));
  }
  return `${st.isFile() ? "f" : "x"}:${st.mtimeMs}:${st.size}:${st.ino}`;
}

/** The text of a regular file, at most maxBytes, read within budgetMs; null when there is no file. Throws
 * Refused for anything else (a FIFO, a device, a directory, a symbolic link, too large, too slow). */
export function readRegular(file, { maxBytes = MAX_BYTES, budgetMs = BUDGET_MS, clock = Date.now } = {}) {
  const t0 = clock();
  coolDown(file, t0);
  let fd;
  try {
    fd = fs.openSync(file, READ_FLAGS);
  } catch (e) {
    if (e?.code === "ENOENT" || e?.code === "ENOTDIR") return null;
    throw new Refused(file, e?.code === "ELOOP" ? "a symbolic link" : e?.code ?? String(e));
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new Refused(file, kind(st));
    if (st.size > maxBytes) throw new Refused(file, `larger than ${maxBytes} bytes`);
    const chunks = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(CHUNK, maxBytes + 1 - total));
      let n;
      try {
        n = fs.readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        throw new Refused(file, e?.code ?? String(e));
      }
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
      if (total > maxBytes) throw new Refused(file, `larger than ${maxBytes} bytes`);
      if (overBudget(file, t0, budgetMs, clock)) throw new Refused(file, `not read within ${budgetMs} ms`);
    }
    return Buffer.concat(chunks, total).toString("utf8");
  } finally {
    fs.closeSync(fd);
  }
}

/** The name of a temp file beside `file` nobody can predict. */
export function tempName(file, random = () => crypto.randomBytes(12).toString("hex")) {
  return path.join(path.dirname(file), `.${path.basename(file)}.${random()}.tmp`);
}

/** Write `text` to `file` atomically: a temp file created exclusively beside it (never through a link), fsync,
 * the old file's mode kept (0600 for a new one), rename, fsync the folder. An existing `file` that is not a
 * regular file is refused and left alone; the temp file never outlives a failure. */
export function writeAtomic(file, text, { budgetMs = BUDGET_MS, clock = Date.now, random } = {}) {
  const t0 = clock();
  coolDown(file, t0);
  const dir = path.dirname(file);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  let mode = 0o600;
  let st = null;
  try {
    st = fs.lstatSync(file);
  } catch (e) {
    if (e?.code !== "ENOENT") throw new Refused(file, e?.code ?? String(e));
  }
  if (st) {
    if (!st.isFile()) throw new Refused(file, kind(st));
    mode = st.mode & 0o777;
  }
  const tmp = tempName(file, random);
  const fd = fs.openSync(tmp, TEMP_FLAGS, mode); // EEXIST/ELOOP: somebody's file or link at the name, left alone
  let done = false;
  try {
    try {
      const data = Buffer.from(text, "utf8");
      let off = 0;
      while (off < data.length) off += fs.writeSync(fd, data, off, data.length - off);
      fs.fchmodSync(fd, mode);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file); // atomic: a reader sees the old file or the new one, never half of one
    done = true;
  } finally {
    if (!done) {
      try {
        fs.unlinkSync(tmp);
      } catch {
        // already gone
      }
    }
  }
  try {
    const dfd = fs.openSync(dir, C.O_RDONLY | (C.O_DIRECTORY ?? 0) | (C.O_NONBLOCK ?? 0));
    try {
      fs.fsyncSync(dfd);
    } finally {
      fs.closeSync(dfd);
    }
  } catch {
    // a folder that cannot be opened for fsync (some platforms): the rename is still atomic
  }
  overBudget(file, t0, budgetMs, clock); // written, but slow: the file is left alone for a while
}

/** Forget the cool-downs (tests). */
export function forgetSlow() {
  slowUntil.clear();
}

// ---------------------------------------------------------------------------------------------------------
// The plugin's two files besides the state (sticky.js): the rules occd writes, the counts occd reads.

/** The rules file occd writes: parsed, re-read when its signature changes; the last good one kept on a bad
 * (half-written, not JSON) file; none (every session off) when there is no file. Throws Refused for a file that
 * is not a regular file, too large or too slow (the engine then passes the history unchanged). */
export class PolicyFile {
  constructor(file) {
    this.file = file;
    this.sig = null;
    this.policy = null;
    this.error = null;
  }

  get() {
    const sig = signature(this.file);
    if (sig === null) {
      this.sig = null;
      this.policy = null; // no file: every session off
      return null;
    }
    if (sig !== this.sig) {
      let text;
      try {
        text = readRegular(this.file);
      } catch (e) {
        this.sig = null; // looked at again next turn (cheap: no read of anything but a regular file)
        this.policy = null;
        throw e;
      }
      try {
        this.policy = JSON.parse(text ?? "null");
        this.error = null;
      } catch (e) {
        this.error = String(e?.message ?? e).slice(0, 200);
      }
      this.sig = sig;
    }
    return this.policy;
  }
}

const MAX_SESSIONS = 500;

/** The counts file occd reads: {version, engine, engineVersion, sessions: {key: counts}, updatedAt}. */
export class StatsFile {
  constructor(file, stamp = {}) {
    this.file = file;
    this.stamp = stamp;
  }

  /** Merge one session's counts (or an error count) into the file: read, update, write atomically. A file that is
   * not a regular one (or too large, too slow) is refused (Refused), never replaced. */
  update(fn) {
    let data;
    try {
      data = JSON.parse(readRegular(this.file) ?? "{}");
    } catch (e) {
      if (e instanceof Refused) throw e;
      data = {}; // half-written or damaged: started over
    }
    if (!data || typeof data !== "object" || Array.isArray(data)) data = {};
    data.version = 1;
    Object.assign(data, this.stamp);
    data.sessions = data.sessions && typeof data.sessions === "object" && !Array.isArray(data.sessions) ? data.sessions : {};
    fn(data);
    const keys = Object.keys(data.sessions);
    if (keys.length > MAX_SESSIONS) {
      keys.sort((a, b) => (data.sessions[a]?.at ?? 0) - (data.sessions[b]?.at ?? 0));
      for (const k of keys.slice(0, keys.length - MAX_SESSIONS)) delete data.sessions[k];
    }
    data.updatedAt = Date.now();
    writeAtomic(this.file, JSON.stringify(data));
  }
}
