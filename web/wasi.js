// A minimal WASI (snapshot preview 1) for running wisp.wasm in a page: the
// calls wasi-libc makes for wisp's CLI, over an in-memory file tree.
//
// Files are Blobs (a File from the file picker, a fetched body) read in
// slices when wisp reads them, so a model is never copied whole into JS
// memory; files wisp writes are kept as byte arrays. fd_read and fd_pread
// are asynchronous (Blob.arrayBuffer), so the page wraps them in
// WebAssembly.Suspending (JSPI) with the other suspending imports: the
// module sleeps while a slice is read.
//
// Standard output and error go to callbacks as text. Standard input is what
// the page hands to input() (a chat's lines), until closeInput(); a read of
// it, or a poll on it, suspends the module until some comes. The tree has one
// root, preopened as fd 3 ("/").

const E = { OK: 0, ACCES: 2, BADF: 8, EXIST: 20, INVAL: 28, ISDIR: 31, NOENT: 44, NOSYS: 52, NOTDIR: 54, NOTEMPTY: 55 };
const FT = { CHAR: 2, DIR: 3, FILE: 4 };
const O = { CREAT: 1, DIRECTORY: 2, EXCL: 4, TRUNC: 8 };

export class Exit extends Error {
  constructor(code) {
    super(`exit ${code}`);
    this.code = code;
  }
}

// A directory is a Map name -> node; a file node is {blob} or {bytes}.
function dirNode() { return { dir: new Map() }; }
function size(node) { return node.blob ? node.blob.size : node.bytes ? node.bytes.length : 0; }

export class Wasi {
  // files: {"/model/manifest.json": Blob, ...}; args: argv (argv[0] included).
  constructor({ args, env = [], files = {}, stdout, stderr }) {
    this.args = args;
    this.env = env;
    this.root = dirNode();
    for (const [path, blob] of Object.entries(files)) this.put(path, { blob });
    this.out = [stdout, stderr];
    this.dec = [new TextDecoder(), new TextDecoder()];
    this.fds = new Map([[3, { node: this.root, path: "/", pos: 0 }]]);
    this.nextFd = 4;
    this.memory = null;
    this.stdin = { bytes: new Uint8Array(0), eof: false, wake: null };
  }

  // Hands text to the module's standard input.
  input(text) {
    const b = new TextEncoder().encode(text), old = this.stdin.bytes;
    this.stdin.bytes = new Uint8Array(old.length + b.length);
    this.stdin.bytes.set(old);
    this.stdin.bytes.set(b, old.length);
    this.wakeInput();
  }
  closeInput() {
    this.stdin.eof = true;
    this.wakeInput();
  }
  wakeInput() {
    const w = this.stdin.wake;
    this.stdin.wake = null;
    if (w) w();
  }
  // Resolves once standard input has bytes or is closed.
  async inputReady() {
    while (!this.stdin.bytes.length && !this.stdin.eof) await new Promise((ok) => { this.stdin.wake = ok; });
  }

  put(path, node) {
    const parts = path.split("/").filter(Boolean);
    let d = this.root;
    for (const p of parts.slice(0, -1)) {
      if (!d.dir.has(p)) d.dir.set(p, dirNode());
      d = d.dir.get(p);
    }
    d.dir.set(parts[parts.length - 1], node);
  }

  // A file written by wisp, as bytes (or undefined).
  file(path) {
    const n = this.lookup(path.split("/").filter(Boolean));
    return n && (n.bytes || n.blob);
  }

  lookup(parts, from = this.root) {
    let n = from;
    for (const p of parts) {
      if (p === "" || p === ".") continue;
      if (!n.dir) return null;
      n = n.dir.get(p);
      if (!n) return null;
    }
    return n;
  }

  view() { return new DataView(this.memory.buffer); }
  bytes() { return new Uint8Array(this.memory.buffer); }
  str(ptr, len) { return new TextDecoder().decode(this.bytes().slice(ptr, ptr + len)); }

  resolve(dirfd, ptr, len) {
    const base = this.fds.get(dirfd);
    if (!base || !base.node.dir) return null;
    const path = this.str(ptr, len);
    const parts = path.split("/").filter((p) => p && p !== ".");
    const parent = this.lookup(parts.slice(0, -1), path.startsWith("/") ? this.root : base.node);
    return { parent, name: parts[parts.length - 1], parts, base: base.node };
  }

  writeFilestat(ptr, node) {
    const v = this.view();
    for (let i = 0; i < 64; i += 8) v.setBigUint64(ptr + i, 0n, true);
    v.setUint8(ptr + 16, node.dir ? FT.DIR : FT.FILE);
    v.setBigUint64(ptr + 24, 1n, true);
    v.setBigUint64(ptr + 32, BigInt(size(node)), true);
  }

  iovecs(iovs, n) {
    const v = this.view(), out = [];
    for (let i = 0; i < n; i++) out.push([v.getUint32(iovs + 8 * i, true), v.getUint32(iovs + 8 * i + 4, true)]);
    return out;
  }

  async readAt(node, pos, iovs, n) {
    let total = 0;
    for (const [buf, len] of this.iovecs(iovs, n)) {
      const end = Math.min(pos + len, size(node));
      if (end <= pos) break;
      const chunk = node.blob ? new Uint8Array(await node.blob.slice(pos, end).arrayBuffer()) : node.bytes.subarray(pos, end);
      this.bytes().set(chunk, buf);
      total += chunk.length;
      pos += chunk.length;
      if (chunk.length < len) break;
    }
    return total;
  }

  writeAt(node, pos, iovs, n) {
    let total = 0;
    for (const [buf, len] of this.iovecs(iovs, n)) total += len;
    if (node.blob) return -1;
    const need = pos + total;
    if (need > node.bytes.length) {
      const grown = new Uint8Array(need);
      grown.set(node.bytes);
      node.bytes = grown;
    }
    for (const [buf, len] of this.iovecs(iovs, n)) {
      node.bytes.set(this.bytes().subarray(buf, buf + len), pos);
      pos += len;
    }
    return total;
  }

  // The import object's wasi_snapshot_preview1; `suspending` wraps the
  // asynchronous calls (WebAssembly.Suspending in the page).
  imports(suspending) {
    const self = this;
    const v = () => self.view();
    const strings = (list, ptrs, buf) => {
      const enc = new TextEncoder();
      for (const s of list) {
        const b = enc.encode(s + "\0");
        v().setUint32(ptrs, buf, true);
        self.bytes().set(b, buf);
        ptrs += 4;
        buf += b.length;
      }
      return E.OK;
    };
    const sizes = (list, count, total) => {
      v().setUint32(count, list.length, true);
      v().setUint32(total, list.reduce((a, s) => a + new TextEncoder().encode(s).length + 1, 0), true);
      return E.OK;
    };
    return {
      args_get: (p, b) => strings(self.args, p, b),
      args_sizes_get: (c, t) => sizes(self.args, c, t),
      environ_get: (p, b) => strings(self.env, p, b),
      environ_sizes_get: (c, t) => sizes(self.env, c, t),
      clock_time_get(id, precision, out) {
        const ns = id === 0 ? BigInt(Date.now()) * 1000000n : BigInt(Math.round(performance.now() * 1e6));
        v().setBigUint64(out, ns, true);
        return E.OK;
      },
      sched_yield: () => E.OK,
      proc_exit(code) { throw new Exit(code); },
      // Clocks (nanosleep) are due at once; a read of standard input waits
      // for input (a chat waiting for its next line).
      poll_oneoff: suspending(async (subs, events, n, out) => {
        const isStdin = (i) => v().getUint8(subs + 48 * i + 8) === 1 && v().getUint32(subs + 48 * i + 16, true) === 0;
        let clocks = false;
        for (let i = 0; i < n; i++) clocks = clocks || v().getUint8(subs + 48 * i + 8) === 0;
        if (!clocks) await self.inputReady();
        let k = 0;
        for (let i = 0; i < n; i++) {
          const tag = v().getUint8(subs + 48 * i + 8);
          if (tag === 1 && isStdin(i) && !self.stdin.bytes.length && !self.stdin.eof) continue;
          const e = events + 32 * k++;
          for (let j = 0; j < 32; j += 8) v().setBigUint64(e + j, 0n, true);
          v().setBigUint64(e, v().getBigUint64(subs + 48 * i, true), true);
          v().setUint8(e + 10, tag);
          if (tag === 1) {
            v().setBigUint64(e + 16, BigInt(isStdin(i) ? self.stdin.bytes.length : 0), true);
            v().setUint16(e + 24, isStdin(i) && self.stdin.eof ? 1 : 0, true); // hangup
          }
        }
        v().setUint32(out, k, true);
        return E.OK;
      }),
      fd_prestat_get(fd, out) {
        if (fd !== 3) return E.BADF;
        v().setUint8(out, 0);
        v().setUint32(out + 4, 1, true);
        return E.OK;
      },
      fd_prestat_dir_name(fd, ptr, len) {
        if (fd !== 3) return E.BADF;
        self.bytes()[ptr] = 47; // "/"
        return E.OK;
      },
      fd_fdstat_get(fd, out) {
        const f = self.fds.get(fd);
        if (fd > 2 && !f) return E.BADF;
        v().setUint8(out, fd <= 2 ? FT.CHAR : f.node.dir ? FT.DIR : FT.FILE);
        v().setUint16(out + 2, 0, true);
        v().setBigUint64(out + 8, 0xffffffffffffffffn, true);
        v().setBigUint64(out + 16, 0xffffffffffffffffn, true);
        return E.OK;
      },
      fd_fdstat_set_flags: () => E.OK,
      fd_sync: () => E.OK,
      fd_filestat_get(fd, out) {
        const f = self.fds.get(fd);
        if (!f) {
          if (fd > 2) return E.BADF;
          self.writeFilestat(out, {});
          v().setUint8(out + 16, FT.CHAR);
          return E.OK;
        }
        self.writeFilestat(out, f.node);
        return E.OK;
      },
      fd_filestat_set_size(fd, n) {
        const f = self.fds.get(fd);
        if (!f || !f.node.bytes) return E.BADF;
        const b = new Uint8Array(Number(n));
        b.set(f.node.bytes.subarray(0, Math.min(b.length, f.node.bytes.length)));
        f.node.bytes = b;
        return E.OK;
      },
      path_filestat_get(dirfd, flags, ptr, len, out) {
        const r = self.resolve(dirfd, ptr, len);
        if (!r) return E.BADF;
        const node = self.lookup(r.parts, self.str(ptr, len).startsWith("/") ? self.root : r.base);
        if (!node) return E.NOENT;
        self.writeFilestat(out, node);
        return E.OK;
      },
      path_open(dirfd, dirflags, ptr, len, oflags, rb, ri, fdflags, out) {
        const r = self.resolve(dirfd, ptr, len);
        if (!r) return E.BADF;
        let node = r.name === undefined ? r.base : r.parent && r.parent.dir ? r.parent.dir.get(r.name) : null;
        if (!r.parent && r.name !== undefined) return E.NOENT;
        if (node && oflags & O.CREAT && oflags & O.EXCL) return E.EXIST;
        if (!node) {
          if (!(oflags & O.CREAT)) return E.NOENT;
          node = { bytes: new Uint8Array(0) };
          r.parent.dir.set(r.name, node);
        }
        if (oflags & O.DIRECTORY && !node.dir) return E.NOTDIR;
        if (oflags & O.TRUNC) {
          if (node.dir) return E.ISDIR;
          node.bytes = new Uint8Array(0);
          delete node.blob;
        }
        const fd = self.nextFd++;
        self.fds.set(fd, { node, pos: 0, append: (fdflags & 1) !== 0 });
        v().setUint32(out, fd, true);
        return E.OK;
      },
      fd_close(fd) { return self.fds.delete(fd) ? E.OK : E.BADF; },
      fd_seek(fd, off, whence, out) {
        const f = self.fds.get(fd);
        if (!f) return E.BADF;
        const base = whence === 0 ? 0 : whence === 1 ? f.pos : size(f.node);
        const p = base + Number(off);
        if (p < 0) return E.INVAL;
        f.pos = p;
        v().setBigUint64(out, BigInt(p), true);
        return E.OK;
      },
      fd_read: suspending(async (fd, iovs, n, out) => {
        if (fd === 0) {
          await self.inputReady();
          let got = 0;
          for (const [buf, len] of self.iovecs(iovs, n)) {
            const k = Math.min(len, self.stdin.bytes.length);
            self.bytes().set(self.stdin.bytes.subarray(0, k), buf);
            self.stdin.bytes = self.stdin.bytes.slice(k);
            got += k;
            if (k < len) break;
          }
          v().setUint32(out, got, true);
          return E.OK;
        }
        const f = self.fds.get(fd);
        if (!f || f.node.dir) return E.BADF;
        const got = await self.readAt(f.node, f.pos, iovs, n);
        f.pos += got;
        v().setUint32(out, got, true);
        return E.OK;
      }),
      fd_pread: suspending(async (fd, iovs, n, off, out) => {
        const f = self.fds.get(fd);
        if (!f || f.node.dir) return E.BADF;
        v().setUint32(out, await self.readAt(f.node, Number(off), iovs, n), true);
        return E.OK;
      }),
      fd_write(fd, iovs, n, out) {
        if (fd === 1 || fd === 2) {
          let total = 0;
          for (const [buf, len] of self.iovecs(iovs, n)) {
            self.out[fd - 1](self.dec[fd - 1].decode(self.bytes().slice(buf, buf + len), { stream: true }));
            total += len;
          }
          v().setUint32(out, total, true);
          return E.OK;
        }
        const f = self.fds.get(fd);
        if (!f || f.node.dir) return E.BADF;
        if (f.append) f.pos = size(f.node);
        const wrote = self.writeAt(f.node, f.pos, iovs, n);
        if (wrote < 0) return E.ACCES;
        f.pos += wrote;
        v().setUint32(out, wrote, true);
        return E.OK;
      },
      fd_pwrite(fd, iovs, n, off, out) {
        const f = self.fds.get(fd);
        if (!f || f.node.dir) return E.BADF;
        const wrote = self.writeAt(f.node, Number(off), iovs, n);
        if (wrote < 0) return E.ACCES;
        v().setUint32(out, wrote, true);
        return E.OK;
      },
      fd_readdir(fd, buf, len, cookie, out) {
        const f = self.fds.get(fd);
        if (!f || !f.node.dir) return E.NOTDIR;
        const enc = new TextEncoder();
        const names = [...f.node.dir.keys()];
        let used = 0;
        for (let i = Number(cookie); i < names.length; i++) {
          const name = enc.encode(names[i]);
          const ent = new Uint8Array(24 + name.length);
          const dv = new DataView(ent.buffer);
          dv.setBigUint64(0, BigInt(i + 1), true);
          dv.setBigUint64(8, BigInt(i + 1), true);
          dv.setUint32(16, name.length, true);
          dv.setUint8(20, f.node.dir.get(names[i]).dir ? FT.DIR : FT.FILE);
          ent.set(name, 24);
          const k = Math.min(ent.length, len - used);
          self.bytes().set(ent.subarray(0, k), buf + used);
          used += k;
          if (used >= len) break;
        }
        v().setUint32(out, used, true);
        return E.OK;
      },
      path_create_directory(dirfd, ptr, len) {
        const r = self.resolve(dirfd, ptr, len);
        if (!r || !r.parent || !r.parent.dir) return E.NOENT;
        if (r.parent.dir.has(r.name)) return E.EXIST;
        r.parent.dir.set(r.name, dirNode());
        return E.OK;
      },
      path_remove_directory(dirfd, ptr, len) {
        const r = self.resolve(dirfd, ptr, len);
        const n = r && r.parent && r.parent.dir && r.parent.dir.get(r.name);
        if (!n) return E.NOENT;
        if (!n.dir) return E.NOTDIR;
        if (n.dir.size) return E.NOTEMPTY;
        r.parent.dir.delete(r.name);
        return E.OK;
      },
      path_unlink_file(dirfd, ptr, len) {
        const r = self.resolve(dirfd, ptr, len);
        const n = r && r.parent && r.parent.dir && r.parent.dir.get(r.name);
        if (!n) return E.NOENT;
        if (n.dir) return E.ISDIR;
        r.parent.dir.delete(r.name);
        return E.OK;
      },
      path_rename(fd1, p1, l1, fd2, p2, l2) {
        const a = self.resolve(fd1, p1, l1), b = self.resolve(fd2, p2, l2);
        const n = a && a.parent && a.parent.dir && a.parent.dir.get(a.name);
        if (!n || !b || !b.parent || !b.parent.dir) return E.NOENT;
        a.parent.dir.delete(a.name);
        b.parent.dir.set(b.name, n);
        return E.OK;
      },
      path_readlink: () => E.INVAL,
    };
  }
}
