// agent-lanes/testing: runs without a model or a network (docs/testing.md): the scripted
// provider (also on the main entry), cassettes recorded once and replayed, deterministic
// transcripts and fingerprints.
export { ScriptedProvider, type Script, type ScriptStep } from './providers/ScriptedProvider.js';
export * from './transcript/index.js';
