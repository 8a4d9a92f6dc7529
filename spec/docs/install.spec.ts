// What the README and docs/getting-started.md tell a reader who installs from a clone or runs
// the suite, checked as text: the install from a clone keeps its copy (install-links in the
// app's .npmrc, not a flag the next `npm install` forgets), and the clone's commands say what
// `npm test` needs and pay for `npm ci` once.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

/** The text of a markdown section, from its heading to the next heading of the same or a higher level. */
function section(markdown: string, heading: string): string {
  const lines = markdown.split('\n');
  const at = lines.indexOf(heading);
  if (at < 0) throw new Error(`no heading "${heading}"`);
  const level = /^#+/.exec(heading)![0].length;
  // A `#` line inside a code block (a shell comment) is no heading.
  let fenced = false;
  const end = lines.findIndex((line, i) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    return i > at && !fenced && /^#+ /.test(line) && /^#+/.exec(line)![0].length <= level;
  });
  return lines.slice(at, end < 0 ? undefined : end).join('\n');
}

/** The commands of a section's shell blocks, one a line, their comments left out. */
const shellLines = (text: string): string[] =>
  [...text.matchAll(/^```sh\n([\s\S]*?)^```/gm)].flatMap(([, body]) => body!.split('\n').map((line) => line.replace(/#.*$/, '').trim()).filter((line) => line !== ''));

describe('the install and test instructions', () => {
  for (const [file, heading] of [['README.md', '## Install'], ['docs/getting-started.md', '## Install']] as const) {
    it(`${file}: an install from a clone puts install-links=true in the app's .npmrc, and says why`, () => {
      const text = section(read(file), heading);
      expect(shellLines(text)).to.include('echo install-links=true >> .npmrc');
      // The install from a clone is a plain npm install once the .npmrc says it.
      expect(shellLines(text).some((line) => /^npm install --install-links/.test(line))).to.equal(false);
      expect(text.replace(/\s+/g, ' ')).to.match(/the next plain `npm install`/);
    });
  }

  it('README: the clone\'s two commands, each from a fresh checkout, that one `npm ci` serves both, what `npm test` needs and that .ci/run brings it up', () => {
    const text = section(read('README.md'), '## Install');
    const commands = shellLines(text);
    expect(commands.filter((line) => line.includes('npm ci'))).to.deep.equal(['npm ci && npm run example', 'npm ci && npm test']);
    const prose = text.replace(/\s+/g, ' ');
    expect(prose).to.include('`npm ci` once is enough');
    for (const needed of ['Redis on 127.0.0.1:6379', 'PostgreSQL on 127.0.0.1:5432', 'Chromium', 'npm registry', '`.ci/run` brings them up']) expect(prose).to.include(needed);
  });
});
