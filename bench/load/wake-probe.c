// The machine's floor for what a hop adds (issue 65): a hop that does nothing, in C on pipes.
//
//   wake-probe RATE SECONDS HOP_CORE REST_CORE
//
// A caller on REST_CORE makes RATE round trips a second of each of two kinds, for SECONDS:
//   direct: caller -> origin -> caller, the origin on REST_CORE too (as vegeta calls the bench
//           origin in the latency trials);
//   hop:    caller -> hop -> origin -> hop -> caller, the hop alone on HOP_CORE (as a proxy sits
//           between them there): the same work, with four wake-ups across cores.
// Each message is 8 bytes through a pipe; nothing is parsed, allocated or logged on the way, so
// what the hop adds over the direct trip is what the machine charges for crossing cores (the
// scheduler, and on a virtual machine the hypervisor waking an idle virtual CPU). The kinds are
// half a slot apart, so neither rides on the other's wake-up. Prints one JSON line of microseconds:
// {"rate":R,"seconds":S,"direct":[p50,p99,p99.9,max],"hop":[p50,p99,p99.9,max]}.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void pin(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("sched_setaffinity");
    exit(2);
  }
}

static void sleep_until(int64_t at) {
  struct timespec t = {.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
  }
}

// One whole message, or the end of the conversation (the other side closed: 0).
static int get(int fd, int64_t *v) {
  ssize_t n = read(fd, v, sizeof *v);
  if (n == (ssize_t)sizeof *v) return 1;
  if (n == 0) return 0;
  perror("read");
  exit(2);
}

static void put(int fd, int64_t v) {
  if (write(fd, &v, sizeof v) != (ssize_t)sizeof v) {
    perror("write");
    exit(2);
  }
}

// Answers each message from `in` on `out`: the origin (ended by the caller's kill).
static void echo(int core, int in, int out) {
  pin(core);
  int64_t v;
  while (get(in, &v)) put(out, v);
  exit(0);
}

static int by_value(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void print_quantiles(int64_t *d, long n) {
  qsort(d, (size_t)n, sizeof *d, by_value);
  double q[3] = {0.5, 0.99, 0.999};
  printf("[");
  for (int i = 0; i < 3; i++) {
    long at = (long)(q[i] * (double)n);
    if (at >= n) at = n - 1;
    printf("%.1f,", (double)d[at] / 1e3);
  }
  printf("%.1f]", (double)d[n - 1] / 1e3);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: wake-probe RATE SECONDS HOP_CORE REST_CORE\n");
    return 2;
  }
  long rate = atol(argv[1]), seconds = atol(argv[2]);
  int hop_core = atoi(argv[3]), rest_core = atoi(argv[4]);
  if (rate <= 0 || seconds <= 0 || rate * seconds > 10000000) {
    fprintf(stderr, "wake-probe: RATE and SECONDS must be positive, RATE x SECONDS at most 1e7\n");
    return 2;
  }
  // caller -> origin (direct), origin -> caller; caller -> hop, hop -> origin, origin -> hop,
  // hop -> caller.
  int to_direct[2], from_direct[2], to_hop[2], hop_to_origin[2], origin_to_hop[2], from_hop[2];
  int *pipes[] = {to_direct, from_direct, to_hop, hop_to_origin, origin_to_hop, from_hop};
  for (int i = 0; i < 6; i++)
    if (pipe(pipes[i]) != 0) {
      perror("pipe");
      return 2;
    }
  // Every process holds every pipe's ends, so none sees an end of input: the caller kills them.
  pid_t children[3];
  if ((children[0] = fork()) == 0) echo(rest_core, to_direct[0], from_direct[1]);
  if ((children[1] = fork()) == 0) echo(rest_core, hop_to_origin[0], origin_to_hop[1]);
  if ((children[2] = fork()) == 0) {
    pin(hop_core);
    int64_t v;
    while (get(to_hop[0], &v)) {
      put(hop_to_origin[1], v);
      if (!get(origin_to_hop[0], &v)) break;
      put(from_hop[1], v);
    }
    exit(0);
  }
  pin(rest_core);
  long n = rate * seconds;
  int64_t *direct = malloc(sizeof(int64_t) * (size_t)n), *hop = malloc(sizeof(int64_t) * (size_t)n);
  if (direct == NULL || hop == NULL) return 2;
  int64_t interval = 1000000000 / rate, start = now_ns() + 10000000, v;
  for (long i = 0; i < n; i++) {
    sleep_until(start + i * interval);
    int64_t t = now_ns();
    put(to_direct[1], t);
    get(from_direct[0], &v);
    direct[i] = now_ns() - t;
    sleep_until(start + i * interval + interval / 2);
    t = now_ns();
    put(to_hop[1], t);
    get(from_hop[0], &v);
    hop[i] = now_ns() - t;
  }
  for (int i = 0; i < 3; i++) {
    kill(children[i], SIGKILL);
    waitpid(children[i], NULL, 0);
  }
  printf("{\"rate\":%ld,\"seconds\":%ld,\"direct\":", rate, seconds);
  print_quantiles(direct, n);
  printf(",\"hop\":");
  print_quantiles(hop, n);
  printf("}\n");
  return 0;
}
