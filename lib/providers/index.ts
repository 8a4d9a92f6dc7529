export { ScriptedProvider, type Script, type ScriptStep } from './ScriptedProvider.js';
