// A root hook of the suite: mocha must exit by itself once the last spec is done. If something a
// spec left behind (a socket, a timer, a child) keeps the process alive, this says what, on a
// timer that does not itself keep the process alive.
export const mochaHooks = {
  afterAll(): void {
    const timer = setTimeout(() => {
      const resources = process.getActiveResourcesInfo().filter((kind) => kind !== 'TTYWrap');
      console.error(`mocha has not exited 30 s after the last spec; still open: ${resources.join(', ')}`);
    }, 30_000);
    timer.unref();
  },
};
