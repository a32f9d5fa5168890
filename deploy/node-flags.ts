/**
 * The V8 flags every service process starts with. V8 reads them only as a process starts (set
 * later, they do nothing), so they go on the command line: the stack, the bench and the test
 * helpers put this list before `deploy/start.mjs`; package.json's `start` and bench/api-fuzz.sh
 * spell it out, and test/node-flags.unit.test.ts keeps those the same as this list.
 *
 * `--max-semi-space-size=64`: the young generation may grow to 64 MB a semi-space (Node 20 stops
 * at 16). The proxy allocates about 18 KB a call, nearly all of it dead by the next scavenge, and
 * a scavenge costs what survives it (the calls in flight), not what died: with room for more
 * calls between scavenges, there are a third as many, for about the same work each. Measured on
 * a held bench stack (issue 28), the same build with and without the flag, eight alternating 5 s
 * pairs at saturation: 36.5 against 40.5 µs of CPU a call, minor collections 345 against 1,228
 * (0.58 s of pauses against 1.33 s), for about 100 MB more resident memory at saturation; with 32
 * MB a semi-space, 36.2 against 39.2 µs and 40 MB more.
 *
 * `--min-semi-space-size=32`: and never shrinks below 32 MB a semi-space. V8 shrinks the young
 * generation once a process has idled a while and grows it back only as scavenges find many
 * survivors, so a proxy that had idled for minutes (as the bench's does between its trials) and
 * then carried a steady few thousand calls a second stayed small and scavenged far more often
 * than its traffic needs: on a held bench stack at 3,900 calls/s (8 s trials, 8 s idle between,
 * issue 65), such a process ran 109–122 minor collections a trial (75–91 ms of pauses, about 1 %
 * of the trial: a call arriving during one waits it out) against 13–25 (20–37 ms) for one with
 * the flag, and 85–90 against 73–88 µs of CPU a call; in `npm run bench:proxy`, B3 ran 49–113 a
 * trial at 3,900/s without it and 15–16 at 4,800/s with it. Two fresh processes (not yet shrunk)
 * differ little: 31–32 against 16–31 at 4,800/s. The cost is up to 64 MB more memory committed
 * while idle.
 *
 * `--heap-growing-percent=300`: after each major collection the old generation may grow to four
 * times what survived it before the next. Left to V8's own estimate, a process that idled early
 * (a proxy waiting for its first calls, as in the bench) could keep a limit just above its live
 * data (about 19 MB) and run a major collection after nearly every scavenge under load: 17–31
 * major collections per 5 s against 0–1 with the flag, and 38.0 against 31.4 µs of CPU a call
 * (eight alternating pairs, same build, same idle start; issue 28). The old generation's live
 * data is small, so four times it is tens of MB. Not allowed in `NODE_OPTIONS`: command line only.
 */
export const NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=64',
  '--min-semi-space-size=32',
  '--heap-growing-percent=300',
];
