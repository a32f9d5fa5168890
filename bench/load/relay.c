// A TCP hop that does nothing (issue 65): a reverse proxy that only passes bytes.
//
//   relay ORIGIN_PORT
//
// Listens on a free port of 127.0.0.1 (printed as {"port":N} on the first line of stdout) and,
// for each connection a client opens, opens one to 127.0.0.1:ORIGIN_PORT and passes every byte
// each side sends to the other, as read: nothing parsed, allocated per call, or logged. One
// thread, one epoll loop (as nginx's one worker), TCP_NODELAY both ways. The latency trials run it
// where the proxy runs (alone on core 0, the load generator and the origin on core 1): what it
// adds over calling the origin directly is what a hop on TCP costs there with no HTTP work at
// all, the loopback's socket calls and the wake-ups across cores. It keeps no pool of origin
// connections (nginx and the proxy do): each client connection is one more for the origin, so at
// rates where the origin's core is crowded it is no floor under theirs.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "listen.h"

#define BUFFER 65536
#define EVENTS 256

// One side of a relayed connection: its socket, the other side, and the bytes read from this
// side that the other has not taken yet (written from `start`, `length` of them).
struct end {
  int fd;
  struct end *peer;
  int closed;
  size_t start, length;
  char buffer[BUFFER];
};

static int loop;
// Ends closed during one batch of events, freed after it (a later event may still name them).
static struct end *closing[2 * EVENTS];
static int closing_count;

static void nodelay(int fd) {
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

// What `e` waits for: reading while nothing of it waits to be written, writing while the other
// side's bytes wait for it.
static void watch(struct end *e, int op) {
  struct epoll_event ev = {.events = 0, .data.ptr = e};
  if (e->length == 0) ev.events |= EPOLLIN;
  if (e->peer->length > 0) ev.events |= EPOLLOUT;
  if (epoll_ctl(loop, op, e->fd, &ev) != 0) fail("epoll_ctl");
}

static void close_pair(struct end *e) {
  if (e->closed) return;
  struct end *ends[2] = {e, e->peer};
  for (int i = 0; i < 2; i++) {
    ends[i]->closed = 1;
    close(ends[i]->fd);
    closing[closing_count++] = ends[i];
  }
}

// Writes what `from` holds to its peer; 0 when the connection ended.
static int flush(struct end *from) {
  while (from->length > 0) {
    ssize_t n = write(from->peer->fd, from->buffer + from->start, from->length);
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 1 : 0;
    from->start += (size_t)n;
    from->length -= (size_t)n;
  }
  from->start = 0;
  return 1;
}

static void readable(struct end *e) {
  // Read again only once the peer took what was read before.
  if (e->length > 0) return;
  ssize_t n = read(e->fd, e->buffer, BUFFER);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    close_pair(e);
    return;
  }
  if (n < 0) return;
  e->start = 0;
  e->length = (size_t)n;
  if (!flush(e)) {
    close_pair(e);
    return;
  }
  // The peer took it all (the usual case): nothing to change in what either waits for.
  if (e->length > 0) {
    watch(e, EPOLL_CTL_MOD);
    watch(e->peer, EPOLL_CTL_MOD);
  }
}

static void writable(struct end *e) {
  struct end *from = e->peer;
  if (!flush(from)) {
    close_pair(e);
    return;
  }
  if (from->length == 0) {
    watch(e, EPOLL_CTL_MOD);
    watch(from, EPOLL_CTL_MOD);
  }
}

static void accept_one(int listener, int origin_port) {
  int client = accept4(listener, NULL, NULL, SOCK_NONBLOCK);
  if (client < 0) return;
  int origin = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)origin_port)};
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // A connect on loopback completes at once; the socket is made non-blocking after it.
  if (origin < 0 || connect(origin, (struct sockaddr *)&to, sizeof to) != 0) {
    if (origin >= 0) close(origin);
    close(client);
    return;
  }
  if (fcntl(origin, F_SETFL, fcntl(origin, F_GETFL) | O_NONBLOCK) != 0) fail("fcntl");
  nodelay(client);
  nodelay(origin);
  struct end *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  if (a == NULL || b == NULL) fail("calloc");
  a->fd = client;
  b->fd = origin;
  a->peer = b;
  b->peer = a;
  watch(a, EPOLL_CTL_ADD);
  watch(b, EPOLL_CTL_ADD);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: relay ORIGIN_PORT\n");
    return 2;
  }
  int origin_port = atoi(argv[1]);
  signal(SIGPIPE, SIG_IGN);
  int listener = listen_loopback(0, &loop);
  struct epoll_event events[EVENTS];
  for (;;) {
    int n = epoll_wait(loop, events, EVENTS, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      struct end *e = events[i].data.ptr;
      if (e == NULL) {
        accept_one(listener, origin_port);
        continue;
      }
      if (!e->closed && (events[i].events & (EPOLLERR | EPOLLHUP)) && !(events[i].events & EPOLLIN))
        close_pair(e);
      if (!e->closed && (events[i].events & EPOLLOUT)) writable(e);
      if (!e->closed && (events[i].events & EPOLLIN)) readable(e);
    }
    for (int i = 0; i < closing_count; i++) free(closing[i]);
    closing_count = 0;
  }
}
