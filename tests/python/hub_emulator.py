"""A Hugging Face Hub emulator for the tests: dataset repositories with
commits, branches and the refs/convert/parquet revision, served as the
Hub serves them (huggingface_hub's hf_api.py and file_download.py,
huggingface.js's lib/list-files.ts and lib/file-download-info.ts are the
specification), behind Debian's nginx with TLS:

- GET  /api/datasets/ORG/NAME/revision/REV     {"id", "sha"}
- GET  /api/datasets/ORG/NAME/tree/REV[/PATH]  a page of entries, the next
  page in the Link header (rel="next"), `recursive` honoured
- HEAD|GET /datasets/ORG/NAME/resolve/REV/PATH  a file: LFS files
  (.parquet, .tar) answer 302 to a second host (nginx serving blobs by
  sha256, with ranges), X-Linked-Size and X-Linked-Etag beside it; small
  files are served here, ranges included
- 401 (a private repo without its token), 403 GatedRepo, 404 with
  X-Error-Code RepoNotFound, RevisionNotFound, EntryNotFound, and any
  status on demand (`fail`: statuses answered, in turn, to requests whose
  path holds a text); `answers`: a hostile answer to such requests, a
  (status, body) pair or a function(handler, body) that writes its own.

The emulator itself is a ThreadingHTTPServer on 127.0.0.1 in this
process; nginx in front terminates TLS for the Hub's host (a proxy) and
is the CDN host (static files). `requests` records what reached the
emulator (method, path, Authorization); nginx's CDN log records whether
an Authorization header reached it."""
import hashlib
import http.server
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

from test_https import NGINX, free_port, make_ca, openssl

PAGE = 2  # entries per listing page: every test listing spans pages
TOKEN = "hf_emulatorsecrettoken0123456789"


class Repo:
    def __init__(self, name, private=False, gated=False):
        self.name = name
        self.private = private
        self.gated = gated
        self.commits = {}   # sha -> {path: bytes}
        self.refs = {}      # branch, tag or special ref -> sha

    def commit(self, files, branch="main"):
        """A new commit of `files` (path -> bytes) on `branch`; its sha."""
        sha = hashlib.sha1(("%s %d %r" % (self.name, len(self.commits), sorted(files))).encode()).hexdigest()
        self.commits[sha] = dict(files)
        self.refs[branch] = sha
        return sha


class Hub:
    """The emulator and its nginx; `url` is the Hub's endpoint (HF_ENDPOINT),
    `ca` the CA file that verifies both hosts."""

    def __init__(self, folder):
        self.folder = folder
        self.repos = {}
        self.fail = {}       # text in the path -> statuses to answer, in turn
        self.answers = {}    # text in the path -> (status, body) answered instead (hostile answers)
        self.requests = []   # (method, path, authorization)
        self.lock = threading.Lock()
        self.blobs = folder / "www" / "blobs"
        self.blobs.mkdir(parents=True)
        (folder / "tmp").mkdir()
        ca_key, self.ca = make_ca(folder, "hub-ca")
        key, csr, cert = (str(folder / n) for n in ("server.key", "server.csr", "server.pem"))
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
        (folder / "san.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
                "-days", "2", "-extfile", str(folder / "san.cnf"))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.port, self.cdn_port = free_port(), free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.cdn = "https://localhost:%d" % self.cdn_port  # another host: another origin
        temps = "".join("  %s_temp_path %s/tmp;\n" % (t, folder) for t in ("client_body", "proxy", "fastcgi",
                                                                             "uwsgi", "scgi"))
        (folder / "nginx.conf").write_text(
            "master_process off;\ndaemon off;\npid %(f)s/nginx.pid;\nerror_log %(f)s/error.log;\n"
            "events { worker_connections 256; }\n"
            "http {\n%(temps)s"
            "  log_format cdn '$request_method $uri \"$http_range\" auth=[$http_authorization]';\n"
            "  keepalive_requests 100000;\n"
            "  server { listen 127.0.0.1:%(port)d ssl; ssl_certificate %(f)s/server.pem;\n"
            "           ssl_certificate_key %(f)s/server.key;\n"
            "           location / { proxy_pass http://127.0.0.1:%(emu)d; proxy_set_header Host $http_host;\n"
            "                        proxy_http_version 1.1; proxy_buffering off; } }\n"
            "  server { listen 127.0.0.1:%(cdn)d ssl; ssl_certificate %(f)s/server.pem;\n"
            "           ssl_certificate_key %(f)s/server.key; root %(f)s/www;\n"
            "           access_log %(f)s/cdn.log cdn; }\n"
            "}\n" % dict(f=folder, temps=temps, port=self.port, cdn=self.cdn_port, emu=self.server.server_port))
        self.nginx = subprocess.Popen([NGINX, "-c", str(folder / "nginx.conf"), "-p", str(folder)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for port in (self.port, self.cdn_port):
            for _ in range(250):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                self.stop()
                raise RuntimeError("nginx did not start: %s" % (folder / "error.log").read_text())

    def add(self, repo):
        self.repos[repo.name] = repo
        for files in repo.commits.values():
            for data in files.values():
                p = self.blobs / hashlib.sha256(data).hexdigest()
                if not p.exists():
                    p.write_bytes(data)
        return repo

    def publish(self, repo):
        """Blobs of commits made after add()."""
        self.add(repo)

    def cdn_log(self):
        p = self.folder / "cdn.log"
        return p.read_text() if p.exists() else ""

    def stop(self):
        if self.nginx and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGQUIT)
            try:
                self.nginx.wait(10)
            except subprocess.TimeoutExpired:
                self.nginx.kill()
                self.nginx.wait()
        self.nginx = None
        self.server.shutdown()
        self.server.server_close()

    # The handler: one class per Hub, reading the Hub's state.
    def _handler(self):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                self.route(body=True)

            def do_HEAD(self):
                self.route(body=False)

            def answer(self, status, data=b"", headers=(), body=True, error_code=None, ctype="application/json"):
                self.send_response(status)
                if error_code:
                    self.send_header("X-Error-Code", error_code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def error(self, status, code, message, body):
                self.answer(status, json.dumps({"error": message}).encode(), body=body, error_code=code)

            def route(self, body):
                auth = self.headers.get("Authorization", "")
                with hub.lock:
                    hub.requests.append((self.command, self.path, auth))
                    for text, statuses in hub.fail.items():
                        if text in self.path and statuses:
                            status = statuses.pop(0)
                            headers = [("Retry-After", "1")] if status == 429 else []
                            return self.answer(status, b'{"error": "injected"}', headers, body)
                    hostile = next((a for text, a in hub.answers.items() if text in self.path), None)
                if hostile is not None:
                    return hostile(self, body) if callable(hostile) else self.answer(*hostile, (), body)
                url = urllib.parse.urlsplit(self.path)
                parts = url.path.split("/")
                api = parts[1:3] == ["api", "datasets"]
                if not api and parts[1:2] != ["datasets"]:
                    return self.error(404, None, "no such route", body)
                base = 3 if api else 2
                name = "/".join(parts[base:base + 2])
                repo = hub.repos.get(name)
                if repo is None or (repo.private and auth != "Bearer " + TOKEN):
                    if repo is not None and auth:
                        return self.error(401, None, "Invalid credentials in Authorization header", body)
                    if repo is not None:
                        return self.error(401, None, "Repository not found", body)
                    return self.error(404, "RepoNotFound", "Repository not found", body)
                if repo.gated and auth != "Bearer " + TOKEN:
                    return self.error(403, "GatedRepo", "Access to dataset %s is restricted" % name, body)
                kind = parts[base + 2] if len(parts) > base + 2 else ""
                rest = parts[base + 3:]
                if api and kind == "revision":
                    return self.revision(repo, urllib.parse.unquote("/".join(rest)), body)
                if api and kind == "tree":
                    return self.tree(repo, rest, url.query, body)
                if not api and kind == "resolve":
                    return self.resolve(repo, rest, body)
                return self.error(404, None, "no such route", body)

            def split_revision(self, repo, rest):
                """REV[/PATH] of a URL: a special ref keeps its slashes."""
                joined = urllib.parse.unquote("/".join(rest))
                for ref in sorted(repo.refs, key=len, reverse=True):
                    if joined == ref or joined.startswith(ref + "/"):
                        return ref, joined[len(ref) + 1:]
                rev, _, path = joined.partition("/")
                return rev, path

            def commit_of(self, repo, rev):
                if rev in repo.commits:
                    return rev
                return repo.refs.get(rev)

            def revision(self, repo, rev, body):
                sha = self.commit_of(repo, rev)
                if sha is None:
                    return self.error(404, "RevisionNotFound", "Invalid rev id: %s" % rev, body)
                self.answer(200, json.dumps({"id": repo.name, "sha": sha, "private": repo.private}).encode(),
                            body=body)

            def tree(self, repo, rest, query, body):
                rev, path = self.split_revision(repo, rest)
                sha = self.commit_of(repo, rev)
                if sha is None:
                    return self.error(404, "RevisionNotFound", "Invalid rev id: %s" % rev, body)
                q = urllib.parse.parse_qs(query)
                recursive = q.get("recursive", ["false"])[0] == "true"
                files = repo.commits[sha]
                prefix = path + "/" if path else ""
                entries = {}
                for f, data in files.items():
                    if not f.startswith(prefix):
                        continue
                    inner = f[len(prefix):]
                    if "/" in inner and not recursive:
                        d = prefix + inner.split("/")[0]
                        entries[d] = {"type": "directory", "oid": "0" * 40, "size": 0, "path": d}
                        continue
                    if recursive:
                        parts = inner.split("/")
                        for i in range(1, len(parts)):
                            d = prefix + "/".join(parts[:i])
                            entries[d] = {"type": "directory", "oid": "0" * 40, "size": 0, "path": d}
                    e = {"type": "file", "oid": hashlib.sha1(data).hexdigest(), "size": len(data), "path": f}
                    if self.is_lfs(f):
                        e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}
                        e["size"] = 130
                    entries[f] = e
                if path and not entries:
                    return self.error(404, "EntryNotFound", "%s does not exist on %s" % (path, rev), body)
                ordered = [entries[k] for k in sorted(entries)]
                start = int(q.get("cursor", ["0"])[0])
                page = ordered[start:start + PAGE]
                headers = []
                if start + PAGE < len(ordered):
                    nq = dict((k, v[0]) for k, v in q.items())
                    nq["cursor"] = str(start + PAGE)
                    host = self.headers.get("Host")
                    nxt = "https://%s%s?%s" % (host, urllib.parse.urlsplit(self.path).path, urllib.parse.urlencode(nq))
                    headers.append(("Link", '<%s>; rel="next"' % nxt))
                self.answer(200, json.dumps(page).encode(), headers, body)

            @staticmethod
            def is_lfs(path):
                return path.endswith((".parquet", ".tar", ".tfrecord"))

            def resolve(self, repo, rest, body):
                rev, path = self.split_revision(repo, rest)
                sha = self.commit_of(repo, rev)
                if sha is None:
                    return self.error(404, "RevisionNotFound", "Invalid rev id: %s" % rev, body)
                data = repo.commits[sha].get(path)
                if data is None:
                    return self.error(404, "EntryNotFound", "%s does not exist on %s" % (path, rev), body)
                common = [("X-Repo-Commit", sha), ("ETag", '"%s"' % hashlib.sha1(data).hexdigest())]
                if self.is_lfs(path):
                    digest = hashlib.sha256(data).hexdigest()
                    return self.answer(302, b"", common + [("Location", "%s/blobs/%s" % (hub.cdn, digest)),
                                                           ("X-Linked-Size", str(len(data))),
                                                           ("X-Linked-Etag", '"%s"' % digest)], body)
                rng = self.headers.get("Range", "")
                if rng.startswith("bytes="):
                    a, _, b = rng[6:].partition("-")
                    a, b = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
                    return self.answer(206, data[a:b + 1], common + [
                        ("Content-Range", "bytes %d-%d/%d" % (a, b, len(data))), ("Accept-Ranges", "bytes")],
                        body, ctype="application/octet-stream")
                self.answer(200, data, common + [("Accept-Ranges", "bytes")], body, ctype="application/octet-stream")

        return Handler


def env_for(hub, **extra):
    """The environment of a process that reads the emulator: HF_ENDPOINT,
    its CA, and nothing of the machine's Hub settings."""
    env = dict(os.environ, HF_ENDPOINT=hub.url, SSL_CERT_FILE=hub.ca, CURL_CA_BUNDLE="", SSL_CERT_DIR="",
               NODE_EXTRA_CA_CERTS=hub.ca, HF_HOME=str(hub.folder / "hf-home"), IMAGEPACK_S3_RETRY_SECONDS="20")
    for k in ("HF_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "IMAGEPACK_CACHE_DIR"):
        env.pop(k, None)
    env.update({k: str(v) for k, v in extra.items()})
    return env
