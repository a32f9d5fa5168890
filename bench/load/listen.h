// What the bench's C servers share (relay.c, origin.c): how a failure ends them, and a listening
// socket on loopback with the epoll loop that watches it.
#ifndef BENCH_LISTEN_H
#define BENCH_LISTEN_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>

static void fail(const char *what) {
  perror(what);
  exit(2);
}

// Listens on 127.0.0.1:port (a free port when 0), prints {"port":N} on the first line of stdout
// once listening, and makes the epoll loop `*loop` with the listener in it, its event's data.ptr
// NULL (the one event that names no connection). Returns the listener. SO_REUSEADDR: the bench
// starts one server on a port another just left, whose connections may be in TIME_WAIT.
static int listen_loopback(int port, int *loop) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int on = 1;
  if (listener >= 0) setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof at;
  if (listener < 0 || bind(listener, (struct sockaddr *)&at, sizeof at) != 0 || listen(listener, 4096) != 0 ||
      getsockname(listener, (struct sockaddr *)&at, &size) != 0)
    fail("listen");
  printf("{\"port\":%d}\n", ntohs(at.sin_port));
  fflush(stdout);
  *loop = epoll_create1(0);
  if (*loop < 0) fail("epoll_create1");
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
  if (epoll_ctl(*loop, EPOLL_CTL_ADD, listener, &ev) != 0) fail("epoll_ctl");
  return listener;
}

#endif
