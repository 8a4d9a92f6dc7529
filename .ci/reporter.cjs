// Mocha's spec reporter, plus the counts written to .ci/out/summary.txt at the end,
// so .ci/run can close with the plain line "N passed, N failed" taken from mocha's results.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

const { EVENT_RUN_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const { passes = 0, failures = 0, pending = 0 } = runner.stats ?? {};
      const out = path.join(__dirname, 'out');
      fs.mkdirSync(out, { recursive: true });
      fs.writeFileSync(path.join(out, 'summary.txt'), `${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = SummaryReporter;
