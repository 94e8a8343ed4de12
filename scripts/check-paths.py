#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-paths.py: every file path the docs and the source comments name exists.

Usage: scripts/check-paths.py [--root DIR] [--allow FILE] [FILE...]

Reads doc/*.md, README.md, bench/README.md, and the comments of the sources
under mely/, mely/steal/, compat/, apps/, bench/, tests/, examples/, tools/,
common/ and scripts/ (C and C++ comments; '#' comments of shell, Python,
Makefile.am and m4 files; a Promela model's comments), or only the FILEs
given, and prints FILE:LINE: PATH for each path it names that is not in the
tree; exit status 1 if there is one, 0 if not, 2 on a usage error.

What counts as a path: a word with an extension of the tree's source and
document files (.c .h .C .cpp .md .sh .py .am .x ...), with or without
directories, or a word that starts with one of the tree's top folders and
ends with '/' (a folder). `*` stands for any characters (`outbox.*`). A path
with a top folder first (mely/io/poller.c) must exist from the top; another
path with a folder (io/poller.c) may be relative to the naming file's folder
or to any folder of the tree (it is the end of some file's path); a bare name
(deliver.c) must be some file's name. The tree is what git tracks (or, out of
a git work tree, what the root holds, build folders aside).

Not paths: URLs; absolute paths and ~ (the user's system: /proc/self/exe);
names in angle brackets (<sys/epoll.h>); a name right after another project's
possessive (libuv's queue.h); and what scripts/check-paths.allow lists: one
glob a line, for generated files, example names and other projects' files
(# starts a comment).
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

TOP_FOLDERS = ("mely", "heuristics", "compat", "apps", "bench", "tests", "examples",
               "tools", "common", "scripts", "doc")
# The folders whose sources' comments are read, and what is not source there.
SOURCE_FOLDERS = ("mely", "heuristics", "compat", "apps", "bench", "tests", "examples",
                  "tools", "common", "scripts")
DATA = ("tests/unit/fixtures/*", "*/corpus/*", "*/corpus-*/*", "*.dict", "*.png", "*.supp")
DOCS = ("README.md", "bench/README.md")

# Source and document files; not what programs and builds write (.csv, .png,
# .pc, .log), nor test data (.txt), which comments name as examples.
EXTS = ("c", "h", "C", "cc", "cpp", "hpp", "md", "sh", "py", "am", "ac", "in", "m4",
        "pml", "x", "supp", "dict")
C_LIKE = (".c", ".h", ".C", ".cc", ".cpp", ".hpp", ".x", ".pml")
HASH_LIKE = (".sh", ".py", ".am", ".ac", ".m4")

PATH_RE = re.compile(
    r"(?<![\w./*+-])"                       # not inside a longer word or path
    r"((?:[\w.+*-]+/)*[\w+*-][\w.+*-]*\.(?:" + "|".join(EXTS) + r"|\*))"
    r"(?!\.?[\w*/+-])"                      # nor followed by more of one
    r"|(?<![\w./*+-])((?:" + "|".join(TOP_FOLDERS) + r")/(?:[\w.+-]+/)*)(?![\w*+-])")
URL_RE = re.compile(r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+")
POSSESSIVE_RE = re.compile(r"([\w+.-]+)'s\s+(?:own\s+)?`?$")


def tracked_files(root):
    """The tree's files, relative to root, and whether git told."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True,
                             check=True).stdout
        return [p for p in out.decode().split("\0") if p], True
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or
                                                            x.startswith(".")))]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    return files, False


def read_allow(path):
    globs, projects = [], set()
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line.startswith("project:"):
                    projects.update(line[len("project:"):].split())
                elif line:
                    globs.append(line)
    except FileNotFoundError:
        pass
    return globs, projects


def c_comments(text):
    """(line, text) of each line's comment text, strings skipped."""
    out, i, n, line, buf = [], 0, len(text), 1, []
    state = None  # None, 'block', 'line', '"', "'"
    while i < n:
        ch = text[i]
        if ch == "\n":
            if buf:
                out.append((line, "".join(buf)))
                buf = []
            line += 1
            if state == "line":
                state = None
            elif state in ('"', "'"):
                state = None  # an unterminated literal ends with its line
            i += 1
            continue
        if state is None:
            if text.startswith("/*", i):
                state, i = "block", i + 2
                continue
            if text.startswith("//", i):
                state, i = "line", i + 2
                continue
            if ch in "\"'":
                state = ch
            i += 1
        elif state == "block":
            if text.startswith("*/", i):
                state, i = None, i + 2
                buf.append(" ")
                continue
            buf.append(ch)
            i += 1
        elif state == "line":
            buf.append(ch)
            i += 1
        else:  # inside a literal
            if ch == "\\":
                i += 2
                continue
            if ch == state:
                state = None
            i += 1
    if buf:
        out.append((line, "".join(buf)))
    return out


def hash_comments(text):
    out = []
    for no, raw in enumerate(text.split("\n"), 1):
        if no == 1 and raw.startswith("#!"):
            continue
        quote, prev = None, " "
        for j, ch in enumerate(raw):
            if quote:
                if ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "#" and (prev.isspace() or j == 0) and not raw[:j].endswith("$"):
                out.append((no, raw[j + 1:]))
                break
            prev = ch
    return out


def doc_lines(text):
    return list(enumerate(text.split("\n"), 1))


def kind_of(path, text):
    if path.endswith(".md"):
        return doc_lines
    if path.endswith(C_LIKE):
        return c_comments
    if path.endswith(HASH_LIKE) or os.path.basename(path) == "Makefile.am":
        return hash_comments
    if text.startswith("#!") and ("sh" in text.split("\n", 1)[0] or
                                  "python" in text.split("\n", 1)[0]):
        return hash_comments
    return None


def files_to_read(files):
    out = []
    for p in files:
        if any(fnmatch.fnmatch(p, g) for g in DATA):
            continue
        if p in DOCS or (p.startswith("doc/") and p.endswith(".md")):
            out.append(p)
        elif p.split("/", 1)[0] in SOURCE_FOLDERS and "/" in p:
            out.append(p)
    return out


class Tree:
    def __init__(self, files):
        self.files = set(files)
        self.dirs = set()
        self.names = set()
        for p in files:
            self.names.add(os.path.basename(p))
            d = os.path.dirname(p)
            while d:
                self.dirs.add(d)
                d = os.path.dirname(d)

    def has(self, p):
        p = os.path.normpath(p)
        if "*" in p:
            return any(fnmatch.fnmatchcase(f, p) for f in self.files)
        return p in self.files or p in self.dirs

    def has_suffix(self, p):
        if "*" in p:
            return any(fnmatch.fnmatchcase(f, "*/" + p) for f in self.files)
        return any(f.endswith("/" + p) for f in self.files) or \
            any(d.endswith("/" + p) for d in self.dirs)

    def has_name(self, name):
        if "*" in name:
            return any(fnmatch.fnmatchcase(n, name) for n in self.names)
        return name in self.names


def exists(tree, path, naming_file):
    p = path.rstrip("/")
    if not p:
        return True
    if p.split("/", 1)[0] in TOP_FOLDERS and "/" in path:
        return tree.has(p)
    if "/" not in p:
        return tree.has_name(p)
    d = os.path.dirname(naming_file)
    while True:
        if tree.has(os.path.join(d, p)):
            return True
        if not d:
            break
        d = os.path.dirname(d)
    return tree.has_suffix(p)


def candidates(text):
    text = URL_RE.sub(lambda m: " " * len(m.group(0)), text)
    for m in PATH_RE.finditer(text):
        path = m.group(1) or m.group(2)
        start = m.start()
        before = text[:start]
        if before.endswith("<") or before.endswith("~") or before.endswith("$") or \
                before.endswith("%") or before.endswith("@"):
            continue
        # an absolute path: the user's system, not the tree
        if re.search(r"(?:^|[\s`'\"(=:,\[])/$", before) or before.endswith("/"):
            continue
        # a version (HTTP/1.x, hwloc 2.x), not a name
        if m.group(1) and not re.search(r"[A-Za-z_*]", os.path.basename(path).rsplit(".", 1)[0]):
            continue
        yield path, before


def check(root, paths, allow_globs, projects, tree):
    bad = []
    for rel in paths:
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            bad.append((rel, 0, "cannot read: %s" % e.strerror))
            continue
        reader = kind_of(rel, text)
        if reader is None:
            continue
        for no, line in reader(text):
            for path, before in candidates(line):
                owner = POSSESSIVE_RE.search(before)
                if owner and owner.group(1) in projects:
                    continue
                if any(fnmatch.fnmatchcase(path, g) for g in allow_globs):
                    continue
                if not exists(tree, path, rel):
                    bad.append((rel, no, path))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--allow", help="allow-list (default: scripts/check-paths.allow under root)")
    ap.add_argument("files", nargs="*", help="files to read, relative to root (default: all)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    if not os.path.isdir(root):
        print("check-paths: %s: not a directory" % root, file=sys.stderr)
        return 2
    allow = args.allow or os.path.join(root, "scripts", "check-paths.allow")
    globs, projects = read_allow(allow)
    files, _ = tracked_files(root)
    tree = Tree(files)
    paths = args.files or files_to_read(files)
    bad = check(root, paths, globs, projects, tree)
    for rel, no, path in bad:
        print("%s:%d: %s" % (rel, no, path))
    if bad:
        print("check-paths: %d path(s) named but not in the tree (fix them, or list them in %s)"
              % (len(bad), os.path.relpath(allow, root)), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
