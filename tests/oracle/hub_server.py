"""A local stand-in for the Hugging Face hub, for the download tests (never used by the product).

Two HTTP servers on 127.0.0.1, each in a thread:
  hub  GET/HEAD /{org}/{name}/resolve/{revision}/{file}  with the hub's headers: X-Repo-Commit,
       ETag (git blob sha1) for small files; for LFS files (*.safetensors, *.bin, ... or >= 10 MiB)
       a 302 to the CDN with X-Linked-Etag (sha256) and X-Linked-Size; 401 + X-Error-Code
       RepoNotFound for a missing or private repo without the token; 404 + RevisionNotFound;
       404 + EntryNotFound + X-Repo-Commit for a missing file.
  cdn  GET/HEAD /repos/{sha256}?sig=...  the LFS bytes, ETag "sha256", Range requests (206 / 416).
       Another origin (another port), so clients drop the Authorization header there, as with the
       real CDN.

Switches (set on the HubServer object between requests):
  interrupt[sha256] = (after_bytes, times)  close the connection after that many body bytes,
                                            `times` times (None: always)
  corrupt.add(sha256)                       serve the body with one byte flipped (same length)
  ignore_range = True                       answer 200 with the whole body to a Range request
  override[file] = {header: value}          replace headers of the hub's answer for that repo file
  length_lie[sha256] = delta                the answer's Content-Length is the body's length + delta
                                            (the body sent is cut to it; a longer claim closes early)
Every request is appended to `log` as dict(server, method, path, range, auth).
"""
import hashlib
import json
import http.server
import os
import socketserver
import threading
import urllib.parse

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx")
LFS_MIN_SIZE = 10 << 20


class FileBlob:
    """A file served from disk (for big benchmarks): its size and sha256, read once."""

    def __init__(self, path):
        self.path = os.fspath(path)
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 24), b""):
                h.update(chunk)
        self.digest = h.hexdigest()
        self.size = os.path.getsize(self.path)

    def __len__(self):
        return self.size


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data) -> str:
    return data.digest if isinstance(data, FileBlob) else hashlib.sha256(data).hexdigest()


def is_lfs(name: str, data) -> bool:
    return name.endswith(LFS_SUFFIXES) or len(data) >= LFS_MIN_SIZE


class Repo:
    def __init__(self, private=False):
        self.commits = {}  # sha -> {filename: bytes}
        self.refs = {}  # name -> sha
        self.private = private


class _Threading(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class HubServer:
    def __init__(self, token="hf_test_token_0123456789"):
        self.repos = {}
        self.blobs = {}  # sha256 -> bytes
        self.token = token
        self.log = []
        self.interrupt = {}
        self.tree_override = {}  # repo key ("datasets/ORG/NAME") -> the body of its file listing
        self.tree_page_size = 0  # > 0: listings paginated by that many entries (Link: rel="next")
        self.tree_next_base = None  # the origin the next-page links name (None: this hub's)
        self.corrupt = set()
        self.ignore_range = False
        self.override = {}
        self.length_lie = {}
        self._lock = threading.Lock()
        self._hub = _Threading(("127.0.0.1", 0), self._handler("hub"))
        self._cdn = _Threading(("127.0.0.1", 0), self._handler("cdn"))
        self.url = f"http://127.0.0.1:{self._hub.server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self._cdn.server_address[1]}"
        self._threads = []

    # ---- repo content
    def add_commit(self, repo_id, files, ref="main", private=False, tags=(), repo_type="model"):
        """Adds a commit holding `files` ({name: bytes}); points `ref` (and `tags`) at it; returns its sha.
        repo_type "dataset": served under /datasets/ORG/NAME/resolve/... and /api/datasets/ORG/NAME/tree/REV."""
        if repo_type == "dataset":
            repo_id = "datasets/" + repo_id
        repo = self.repos.setdefault(repo_id, Repo(private))
        repo.private = repo.private or private
        h = hashlib.sha1(repo_id.encode() + str(len(repo.commits)).encode())
        for name in sorted(files):
            h.update(name.encode() + b"\0" + sha256(files[name]).encode())
        sha = h.hexdigest()
        repo.commits[sha] = dict(files)
        for name, data in files.items():
            if is_lfs(name, data):
                self.blobs[sha256(data)] = data
        for r in (ref, *tags):
            if r:
                repo.refs[r] = sha
        return sha

    def requests(self, server=None, method=None, contains=None):
        with self._lock:
            return [e for e in self.log if (server is None or e["server"] == server)
                    and (method is None or e["method"] == method) and (contains is None or contains in e["path"])]

    # ---- lifecycle
    def __enter__(self):
        for srv in (self._hub, self._cdn):
            t = threading.Thread(target=srv.serve_forever, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc):
        for srv in (self._hub, self._cdn):
            srv.shutdown()
            srv.server_close()

    # ---- HTTP
    def _handler(self, which):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_HEAD(self):
                self._serve(head=True)

            def do_GET(self):
                self._serve(head=False)

            def _record(self):
                with server._lock:
                    server.log.append(dict(server=which, method=self.command, path=self.path,
                                           range=self.headers.get("Range"),
                                           auth=self.headers.get("Authorization")))

            def _reply(self, code, headers, body=b"", head=False):
                headers = dict(headers, **server.override.get(getattr(self, "_fname", None), {}))
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head and body:
                    self.wfile.write(body)

            def _error(self, code, error_code, msg, head, extra=None):
                h = {"X-Error-Code": error_code, "X-Error-Message": msg, "Content-Type": "text/plain"}
                h.update(extra or {})
                self._reply(code, h, msg.encode(), head)

            def _serve(self, head):
                self._record()
                if which == "cdn":
                    return self._serve_cdn(head)
                parts = urllib.parse.urlsplit(self.path).path.split("/")
                if len(parts) >= 6 and parts[1] == "api" and parts[2] in ("models", "datasets") and parts[5] == "tree":
                    return self._serve_tree(parts, head)
                kind = ""
                if len(parts) > 1 and parts[1] == "datasets":  # /datasets/org/name/resolve/...
                    kind, parts = "datasets/", parts[:1] + parts[2:]
                # ['', org, name, 'resolve', rev, file...]
                if len(parts) < 6 or parts[3] != "resolve":
                    return self._error(404, "NotFound", "not a resolve URL", head)
                repo_id = f"{kind}{parts[1]}/{parts[2]}"
                rev = urllib.parse.unquote(parts[4])
                fname = urllib.parse.unquote("/".join(parts[5:]))
                self._fname = fname
                repo = server.repos.get(repo_id)
                auth_ok = self.headers.get("Authorization") == f"Bearer {server.token}"
                if repo is None or (repo.private and not auth_ok):
                    return self._error(401, "RepoNotFound", "Repository not found", head)
                sha = repo.refs.get(rev) or (rev if rev in repo.commits else None)
                if sha is None:
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
                files = repo.commits[sha]
                if fname not in files:
                    return self._error(404, "EntryNotFound", f"{fname} does not exist", head,
                                       {"X-Repo-Commit": sha})
                data = files[fname]
                if is_lfs(fname, data):
                    digest = sha256(data)
                    loc = f"{server.cdn_url}/repos/{digest}?sig=x{sha[:8]}"
                    return self._reply(302, {"Location": loc, "X-Repo-Commit": sha,
                                             "X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(len(data)),
                                             "ETag": f'"{git_blob_sha1(b"pointer " + digest.encode())}"',
                                             "Content-Length": "0"}, b"", head)
                return self._send_body(data, {"X-Repo-Commit": sha, "ETag": f'"{git_blob_sha1(data)}"'}, head,
                                       key=sha256(data))

            def _serve_tree(self, parts, head):
                """/api/{models|datasets}/org/name/tree/rev?recursive=true: every file and folder of the commit,
                as the hub lists them ({"type", "path", "size", "oid"}), in pages of server.tree_page_size when set;
                server.tree_override replaces the body."""
                repo_id = ("datasets/" if parts[2] == "datasets" else "") + f"{parts[3]}/{parts[4]}"
                repo = server.repos.get(repo_id)
                auth_ok = self.headers.get("Authorization") == f"Bearer {server.token}"
                if repo is None or (repo.private and not auth_ok):
                    return self._error(401, "RepoNotFound", "Repository not found", head)
                rev = urllib.parse.unquote("/".join(parts[6:]))
                sha = repo.refs.get(rev) or (rev if rev in repo.commits else None)
                if sha is None:
                    return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
                files = repo.commits[sha]
                folders = sorted({"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)})
                entries = [{"type": "directory", "oid": "0" * 40, "size": 0, "path": d} for d in folders]
                entries += [{"type": "file", "oid": git_blob_sha1(files[f]) if isinstance(files[f], bytes) else "",
                             "size": len(files[f]), "path": f} for f in sorted(files)]
                headers = {"Content-Type": "application/json"}
                size = server.tree_page_size
                if size:  # paginated as the hub does: Link: <next page>; rel="next"
                    q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                    at = int(q.get("cursor", ["0"])[0])
                    if at + size < len(entries):
                        base = server.tree_next_base or server.url
                        nxt = f"{base}{urllib.parse.urlsplit(self.path).path}?recursive=true&cursor={at + size}"
                        headers["Link"] = f'<{nxt}>; rel="next"'
                    entries = entries[at:at + size]
                body = server.tree_override.get(repo_id, json.dumps(entries).encode())
                return self._reply(200, headers, body, head)

            def _serve_cdn(self, head):
                digest = urllib.parse.urlsplit(self.path).path.rsplit("/", 1)[-1]
                data = server.blobs.get(digest)
                if data is None:
                    return self._error(404, "NotFound", "no such blob", head)
                return self._send_body(data, {"ETag": f'"{digest}"'}, head, key=digest)

            def _send_body(self, data, headers, head, key):
                if isinstance(data, FileBlob):
                    return self._send_file(data, headers, head)
                total = len(data)
                headers = dict(headers, **{"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"})
                start, code = 0, 200
                rng = self.headers.get("Range")
                if rng and not server.ignore_range:
                    if not rng.startswith("bytes=") or not rng[6:].rstrip("-").isdigit() or not rng.endswith("-"):
                        return self._error(400, "BadRange", "unsupported Range", head)
                    start = int(rng[6:-1])
                    if start >= total:
                        return self._reply(416, dict(headers, **{"Content-Range": f"bytes */{total}"}), b"", head)
                    code = 206
                    headers["Content-Range"] = f"bytes {start}-{total - 1}/{total}"
                body = data[start:]
                if key in server.corrupt and body:
                    b = bytearray(body)
                    b[len(b) // 2] ^= 0x5A
                    body = bytes(b)
                headers["Content-Length"] = str(len(body))
                lie = server.length_lie.get(key)
                if lie is not None:
                    headers["Content-Length"] = str(max(0, len(body) + lie))
                    body = body[:max(0, len(body) + lie)]
                    self.close_connection = True
                headers.update(server.override.get(getattr(self, "_fname", None), {}) if which == "hub" else {})
                cut = None
                with server._lock:
                    if key in server.interrupt and not head:
                        after, times = server.interrupt[key]
                        if times is None or times > 0:
                            cut = after
                            if times is not None:
                                server.interrupt[key] = (after, times - 1)
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if head:
                    return
                if cut is not None and cut < len(body):
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    try:
                        self.connection.shutdown(2)
                    except OSError:
                        pass
                    return
                self.wfile.write(body)

            def _send_file(self, blob, headers, head):
                start, code = 0, 200
                rng = self.headers.get("Range")
                headers = dict(headers, **{"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"})
                if rng and rng.startswith("bytes=") and rng.endswith("-") and rng[6:-1].isdigit():
                    start, code = int(rng[6:-1]), 206
                    headers["Content-Range"] = f"bytes {start}-{blob.size - 1}/{blob.size}"
                headers["Content-Length"] = str(blob.size - start)
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if head:
                    return
                with open(blob.path, "rb") as f:
                    f.seek(start)
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        self.wfile.write(chunk)

        return Handler
