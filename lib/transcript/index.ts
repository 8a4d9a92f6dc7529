// Deterministic transcripts and cassettes: record a run once (a real provider, real tools),
// replay it anywhere with no network and no tool bodies, whatever finished first.
// Sits above the runner and changes nothing in it: recording wraps the provider and tools, replay answers through them.
export { CassetteRecorder, type CassetteRecorderOptions, type Recording } from './CassetteRecorder.js';
export { CassetteReplay, type CassetteReplayOptions } from './CassetteReplay.js';
export {
  CASSETTE_VERSION,
  type Cassette,
  type RecordedCall,
  type RecordedDelta,
  type RecordedEnding,
  type RecordedReply,
  type RecordedRequest,
  type RecordedRun,
  type RecordedTurn,
} from './Cassette.js';
export { parseCassette, stringifyCassette } from './cassetteText.js';
export type { Difference } from './differences.js';
export {
  CassetteFormatError,
  CassetteMissError,
  CassetteUnusedError,
  FingerprintMismatchError,
  TranscriptMismatchError,
  type CassetteEntryRef,
} from './errors.js';
export { fingerprint, fingerprintChanges, type Fingerprint, type FingerprintedAgent, type FingerprintedTool } from './fingerprint.js';
export { DEFAULT_REDACT, REDACTED, RUN_ID } from './scrub.js';
export { cassetteTranscript, deterministicTranscript, type TranscriptEvent } from './transcript.js';
