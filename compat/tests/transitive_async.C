/* SPDX-License-Identifier: MIT */
// transitive_async.C: a libasync-style program that includes nothing but
// "async.h", and uses what libasync's headers gave programs: the standard and
// system headers of its sysconf.h, its portability macros (U64F, OTF, INT64,
// htonq, stringify, __FL__, xoffsetof, xmalloc...), amisc.h's timespec and
// address operators, init.h's INITFN/EXITFN/INIT, litetime.h's TIMESPEC_*,
// err.h's assert (never compiled out: this file is built with -DNDEBUG), and
// the C++ headers libasync's own headers pulled in. It fails to compile if
// compat gives less; it exits non-zero if a name does not work.
#include "async.h"

#include "check.h" // CHECK(cond): includes nothing itself

// ---- init.h ------------------------------------------------------------------------

static int g_initfn_ran;
static int g_exit_fd = -1;
INITFN(set_initfn_ran);
static void set_initfn_ran()
{
    g_initfn_ran++;
}
EXITFN(say_bye);
static void say_bye()
{
    if (g_exit_fd >= 0)
        v_write(g_exit_fd, "bye", 3);
}

static int g_init_started;
INIT(t_init);
int t_init::count;
void t_init::start()
{
    g_init_started++;
}
void t_init::stop() {}

// ---- sysconf.h ------------------------------------------------------------------------

struct t_rec {
    char c;
    u_int64_t v;
};

static int sum_va(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    int s = 0;
    for (int i = 0; i < n; i++)
        s += va_arg(ap, int);
    va_end(ap);
    return s;
}

static void check_formats()
{
    char buf[64];
    u_int64_t big = INT64(12345678901);
    snprintf(buf, sizeof buf, "%" U64F "u", big);
    CHECK(strcmp(buf, "12345678901") == 0);
    off_t off = 1234567;
    snprintf(buf, sizeof buf, "%" OTF "d", off);
    CHECK(strcmp(buf, "1234567") == 0);
    snprintf(buf, sizeof buf, "%" PRIu64 " %" PRId32, (uint64_t)7, (int32_t)-3);
    CHECK(strcmp(buf, "7 -3") == 0);
    CHECK(INT64_MAX > 0 && UINT32_MAX == 0xffffffffu && INT_MAX > 0 && PATH_MAX >= 256);
    CHECK(strcmp(stringify(MALLOCRESV), "16") == 0);
    CHECK(strncmp(__FL__, "transitive_async.C:", 19) == 0 || strstr(__FL__, "/transitive_async.C:"));
    CHECK(concatenate(12, 34) == 1234);
    CHECK(xoffsetof(t_rec, v) == offsetof(t_rec, v));
    CHECK(MIN(3, 4) == 3 && MAX(3, 4) == 4); // <sys/param.h>
    CHECK(isdigit('7') && !isalpha('7') && toupper('a') == 'A');
    CHECK(sum_va(3, 1, 2, 3) == 6);
}

static void check_byte_order()
{
    u_int64_t q = htonq(INT64(0x0102030405060708));
    CHECK(((unsigned char *)&q)[0] == 1 && ((unsigned char *)&q)[7] == 8);
    CHECK(ntohq(q) == INT64(0x0102030405060708));
    in_addr a, b;
    CHECK(inet_pton(AF_INET, "127.0.0.1", &a) == 1 && inet_pton(AF_INET, "127.0.0.2", &b) == 1);
    CHECK(a != b && !(a == b));
    b.s_addr = a.s_addr;
    CHECK(a == b);
    char text[INET_ADDRSTRLEN];
    CHECK(strcmp(inet_ntop(AF_INET, &a, text, sizeof text), "127.0.0.1") == 0);
    sockaddr_in s1, s2;
    memset(&s1, 0, sizeof s1);
    s1.sin_family = AF_INET;
    s1.sin_port = htons(80);
    s1.sin_addr = a;
    s2 = s1;
    CHECK(s1 == s2);
    s2.sin_port = htons(81);
    CHECK(s1 != s2);
    CHECK(gai_strerror(EAI_NONAME) != NULL); // <netdb.h>
}

static void check_memory()
{
    char *s = xstrdup("libasync");
    CHECK(strcmp(s, "libasync") == 0);
    s = (char *)xrealloc(s, 64);
    strcat(s, " on mely");
    CHECK(strcmp(s, "libasync on mely") == 0);
    xfree(s);
    int *v = (int *)txmalloc(4 * sizeof(int));
    v[3] = 9;
    CHECK(v[3] == 9);
    xfree(v);
    // <sys/mman.h>
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    ((char *)page)[100] = 'x';
    CHECK(munmap(page, 4096) == 0);
}

static void check_time()
{
    timespec a = {1, 999999999}, one = {0, 1};
    timespec b = a + one;
    CHECK(b.tv_sec == 2 && b.tv_nsec == 0);
    CHECK(b - one == a && b - a == one);
    CHECK(a < b && a <= b && b > a && b >= a && a != b && tscmp(a, b) == -1 && tscmp(b, b) == 0);
    TIMESPEC_INC(&a);
    CHECK(TIMESPEC_EQ(a, b) && TIMESPEC_LT(one, a) && !TIMESPEC_LT(a, one));
    timeval tv;
    CHECK(gettimeofday(&tv, NULL) == 0 && tv.tv_sec > 0);
    struct tms t;
    CHECK(times(&t) != (clock_t)-1);
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
}

// <unistd.h>, <fcntl.h>, <sys/stat.h>, <sys/uio.h>, <sys/ioctl.h>, <sys/file.h>
static void check_files()
{
    int p[2];
    CHECK(pipe(p) == 0);
    struct stat sb;
    CHECK(fstat(p[0], &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK(fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK) == 0);
    char h[] = "ab", t[] = "cd";
    iovec iov[2] = {{(iovbase_t)h, 2}, {(iovbase_t)t, 2}};
    CHECK(UIO_MAXIOV >= 2 && writev(p[1], iov, 2) == 4);
    int avail = 0;
    CHECK(ioctl(p[0], FIONREAD, &avail) == 0 && avail == 4);
    char got[8];
    CHECK(read(p[0], got, sizeof got) == 4 && memcmp(got, "abcd", 4) == 0);
    close(p[0]);
    close(p[1]);

    char path[] = "/tmp/mely-transitive-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && unlink(path) == 0);
    CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0 && flock(fd, LOCK_UN) == 0);
    CHECK(fstat(fd, &sb) == 0 && sb.st_mtimespec.tv_sec > 0);
    close(fd);

    CHECK(getpwuid(getuid()) == NULL || getpwuid(getuid())->pw_uid == getuid());
    CHECK(getgrgid(getgid()) == NULL || getgrgid(getgid())->gr_gid == getgid());
    sockaddr_un un;
    CHECK(sizeof un.sun_path >= 92);
}

// <sys/wait.h>, <signal.h>: assert panics (SIGABRT) even with -DNDEBUG, and
// EXITFN runs at exit
static void check_assert_and_exit()
{
    CHECK(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 2);
        assert(1 + 1 == 3);
        _exit(0); // reached only if assert was compiled out
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);

    int p[2];
    CHECK(pipe(p) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        g_exit_fd = p[1];
        exit(0);
    }
    close(p[1]);
    char got[8] = {0};
    CHECK(read(p[0], got, sizeof got) == 3 && strcmp(got, "bye") == 0);
    close(p[0]);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

// the C++ headers: <algorithm>, <utility>, <initializer_list>, <typeinfo>, <new>
static void check_cxx()
{
    int v[] = {5, 2, 9, 1};
    std::sort(v, v + 4);
    CHECK(v[0] == 1 && v[3] == 9 && std::max(3, 8) == 8);
    std::pair<int, int> pr = std::make_pair(1, 2);
    std::swap(pr.first, pr.second);
    CHECK(pr.first == 2);
    std::initializer_list<int> il = {1, 2, 3};
    CHECK(il.size() == 3);
    CHECK(typeid(int) == typeid(v[0]) && typeid(int) != typeid(pr));
    alignas(t_rec) unsigned char raw[sizeof(t_rec)];
    t_rec *r = new (raw) t_rec{'x', 3};
    CHECK(r->v == 3);
    int *p = new (std::nothrow) int(4);
    CHECK(p && *p == 4);
    delete p;
}

// ---- a little event loop ------------------------------------------------------------

static int g_pipe[2];

static void readable()
{
    char c;
    ssize_t n = read(g_pipe[0], &c, 1);
    if (n < 0 && errno == EAGAIN)
        return;
    CHECK(n == 1 && c == 'x');
    fdcb(g_pipe[0], selread, NULL);
    warnx << "transitive async.h: " << "ok\n";
    printf("transitive async.h: ok\n");
    fflush(stdout);
    exit(0);
}

int main(int, char **argv)
{
    setprogname(argv[0]);
    CHECK(g_initfn_ran == 1 && g_init_started == 1);
    check_formats();
    check_byte_order();
    check_memory();
    check_time();
    check_files();
    check_assert_and_exit(); // forks: before the runtime starts its threads
    check_cxx();

    CHECK(pipe(g_pipe) == 0);
    make_async(g_pipe[0]);
    fdcb(g_pipe[0], selread, wrap(readable));
    CHECK(write(g_pipe[1], "x", 1) == 1);
    amain();
}
