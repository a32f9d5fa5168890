/*
 * open-load: an open-model HTTP/1.1 load generator for the latency trials, in C so that what it
 * adds to a call's time is the machine's, not a runtime's (vegeta, in Go, took 210-230 µs of CPU
 * a call and read p99 2-5 ms against a static nginx origin at 1,300 calls/s on this machine).
 *
 *   open-load HOST PORT REQUEST_FILE RATE SECONDS OUT_FILE
 *
 * REQUEST_FILE holds one whole request (head and body) as it goes on the wire. Call i is due at
 * start + i / RATE; it goes out on an idle keep-alive connection at once, or waits for one (64
 * opened at start, more up to 256 while every one is busy). A call's latency runs from when this
 * process woke to write it, or from when it was due if it waited for a connection: a target
 * that falls behind is charged for the wait (no coordinated omission), while a timer that woke
 * this process late (an idle virtual CPU wakes in its own time) is counted apart, as "late".
 * OUT_FILE gets a line a call, in the order they finished: "due_ns,status,latency_ns" (status 0:
 * no answer, a closed connection or the 10 s timeout). stdout gets one line:
 * "calls N ok N late N waited N cpu_us N", where late counts calls this process woke to write
 * more than 1 ms after they were due, waited those that waited for a connection (the target
 * fell behind the schedule) and cpu_us is its own CPU time.
 *
 * Answers are read by Content-Length, or to the end of a chunked body's last chunk.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define FIRST_CONNS 64
#define MAX_CONNS 256
#define BUF 65536
#define TIMEOUT_NS 10000000000LL

typedef struct {
  int fd;
  int busy;
  long long due;   /* the in-flight call's due time */
  long long from; /* when its latency starts: see above */
  size_t used;    /* bytes of the answer read so far */
  char buf[BUF];
} Conn;

static const char *host;
static int port;
static char *request;
static size_t request_len;
static Conn conns[MAX_CONNS];
static int nconns;
static int ep;
static FILE *out;
static long long calls, ok, late, waited_calls;

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void die(const char *what) {
  perror(what);
  exit(2);
}

static int dial(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    fprintf(stderr, "open-load: HOST must be an IPv4 address\n");
    exit(2);
  }
  /* Loopback only: a blocking connect returns at once. */
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

static void watch(int i) {
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) < 0) die("epoll_ctl");
}

static int open_conn(void) {
  if (nconns == MAX_CONNS) return -1;
  int i = nconns++;
  conns[i].fd = dial();
  conns[i].busy = 0;
  watch(i);
  return i;
}

static void reopen(int i) {
  epoll_ctl(ep, EPOLL_CTL_DEL, conns[i].fd, NULL);
  close(conns[i].fd);
  conns[i].fd = dial();
  conns[i].busy = 0;
  watch(i);
}

static void finish(int i, int status, long long at) {
  fprintf(out, "%lld,%d,%lld\n", conns[i].due, status, at - conns[i].from);
  calls++;
  if (status == 200) ok++;
  conns[i].busy = 0;
  conns[i].used = 0;
}

static void send_on(int i, long long due, long long at, int waited) {
  Conn *c = &conns[i];
  c->busy = 1;
  c->due = due;
  c->from = waited ? due : at;
  c->used = 0;
  if (waited) waited_calls++;
  else if (at - due > 1000000) late++;
  size_t at_byte = 0;
  while (at_byte < request_len) {
    ssize_t n = write(c->fd, request + at_byte, request_len - at_byte);
    if (n < 0) {
      if (errno == EINTR) continue;
      finish(i, 0, now_ns());
      reopen(i);
      return;
    }
    at_byte += (size_t)n;
  }
}

/*
 * The answer's total length once its head is in (and, chunked, its end), else 0 for more;
 * `closing` is set when the answer says its connection ends with it.
 */
static size_t answer_length(Conn *c, int *status, int *closing) {
  char *head_end = memmem(c->buf, c->used, "\r\n\r\n", 4);
  if (head_end == NULL) return 0;
  size_t head = (size_t)(head_end - c->buf) + 4;
  *status = 0;
  if (c->used >= 12 && memcmp(c->buf, "HTTP/1.", 7) == 0) *status = atoi(c->buf + 9);
  for (char *line = memmem(c->buf, head, "\r\n", 2); line != NULL && line + 2 < head_end;) {
    line += 2;
    if (strncasecmp(line, "connection:", 11) == 0 && strncasecmp(line + 11, " close", 6) == 0) *closing = 1;
    line = memmem(line, (size_t)(head_end - line) + 2, "\r\n", 2);
  }
  for (char *line = memmem(c->buf, head, "\r\n", 2); line != NULL && line + 2 < head_end;) {
    line += 2;
    if (strncasecmp(line, "content-length:", 15) == 0) {
      size_t body = strtoul(line + 15, NULL, 10);
      return c->used >= head + body ? head + body : 0;
    }
    if (strncasecmp(line, "transfer-encoding:", 18) == 0) {
      char *end = memmem(c->buf + head, c->used - head, "0\r\n\r\n", 5);
      return end == NULL ? 0 : (size_t)(end - c->buf) + 5;
    }
    line = memmem(line, (size_t)(head_end - line) + 2, "\r\n", 2);
  }
  return head; /* no body */
}

static void on_readable(int i, long long at) {
  Conn *c = &conns[i];
  ssize_t n = read(c->fd, c->buf + c->used, BUF - c->used);
  if (n <= 0) {
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (c->busy) finish(i, 0, at);
    reopen(i);
    return;
  }
  c->used += (size_t)n;
  int status = 0, closing = 0;
  size_t length = answer_length(c, &status, &closing);
  if (length > 0) {
    finish(i, status, at);
    /* A connection the answer closed is never written to again. */
    if (closing || memcmp(c->buf, "HTTP/1.0", 8) == 0) reopen(i);
  } else if (c->used == BUF) {
    finish(i, 0, at);
    reopen(i);
  }
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: open-load HOST PORT REQUEST_FILE RATE SECONDS OUT_FILE\n");
    return 2;
  }
  host = argv[1];
  port = atoi(argv[2]);
  FILE *rf = fopen(argv[3], "rb");
  if (rf == NULL) die("request file");
  request = malloc(BUF);
  request_len = fread(request, 1, BUF, rf);
  fclose(rf);
  if (request_len == 0 || request_len == BUF) {
    fprintf(stderr, "open-load: the request must be 1 to %d bytes\n", BUF - 1);
    return 2;
  }
  double rate = atof(argv[4]);
  double seconds = atof(argv[5]);
  out = fopen(argv[6], "w");
  if (out == NULL || rate <= 0 || seconds <= 0) die("arguments");
  long long total = (long long)(rate * seconds);
  double gap = 1e9 / rate;

  ep = epoll_create1(0);
  int timer = timerfd_create(CLOCK_MONOTONIC, 0);
  struct epoll_event tev = {.events = EPOLLIN, .data.u32 = MAX_CONNS};
  epoll_ctl(ep, EPOLL_CTL_ADD, timer, &tev);
  for (int i = 0; i < FIRST_CONNS; i++) open_conn();

  long long start = now_ns() + 10000000LL;
  long long next = 0;          /* the index of the next call to send */
  long long stalled_at = -1;   /* when every connection was last found busy with a call due */
  struct epoll_event evs[64];
  for (;;) {
    long long at = now_ns();
    /* Every call now due goes out, each on an idle connection (one opened if none is). */
    int stalled = 0;
    while (next < total && start + (long long)(next * gap) <= at) {
      int idle = -1;
      for (int i = 0; i < nconns; i++)
        if (!conns[i].busy) {
          idle = i;
          break;
        }
      if (idle < 0) idle = open_conn();
      if (idle < 0) {
        stalled = 1; /* the most connections are all busy: the call waits for an answer */
        stalled_at = at;
        break;
      }
      long long due = start + (long long)(next * gap);
      send_on(idle, due, at, due <= stalled_at);
      next++;
    }
    int busy = 0;
    for (int i = 0; i < nconns; i++) busy += conns[i].busy;
    if (next == total && busy == 0) break;
    if (at - (start + (long long)(seconds * 1e9)) > TIMEOUT_NS) {
      for (int i = 0; i < nconns; i++)
        if (conns[i].busy) finish(i, 0, at);
      break;
    }
    /* Sleep until the next call is due or an answer arrives (only an answer, when stalled). */
    if (next < total && !stalled) {
      long long due = start + (long long)(next * gap);
      struct itimerspec when = {.it_value = {.tv_sec = due / 1000000000LL, .tv_nsec = due % 1000000000LL}};
      timerfd_settime(timer, TFD_TIMER_ABSTIME, &when, NULL);
    }
    /* A bounded wait once nothing is scheduled, so that the timeout above is noticed. */
    int n = epoll_wait(ep, evs, 64, next < total && !stalled ? -1 : 100);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    long long woke = now_ns();
    for (int k = 0; k < n; k++) {
      uint32_t i = evs[k].data.u32;
      if (i == MAX_CONNS) {
        uint64_t expirations;
        if (read(timer, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("timer");
        continue;
      }
      on_readable((int)i, woke);
    }
  }
  fclose(out);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  long long cpu = (long long)ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec +
                  (long long)ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec;
  printf("calls %lld ok %lld late %lld waited %lld cpu_us %lld\n", calls, ok, late, waited_calls, cpu);
  return 0;
}
