// A streamed model turn as it is written: each part decoded as it comes (a part is input from
// outside, as a whole response is), the text joined, each tool call decoded on its own as soon as
// the stream completes it, and at the end the response the turn amounts to: the very response
// a provider giving the turn whole would have given, so the transcript is the same either way.
import { isLeft } from 'fp-ts/lib/Either.js';
import { describeFailures, describeValue } from '../../config/index.js';
import { decodeToolCall, FinishReasonCodec, isStreamPart, UsageCodec, type DecodedResponse, type FinishReason, type ModelResponse, type ToolCall, type Usage } from './model.js';

/** A part of a streamed turn that does not decode; its message names the part and what was wrong. */
export class StreamPartError extends TypeError {
  override readonly name = 'StreamPartError';
}

const partTypes = 'text-delta, tool-call, usage, finish or response';

// The keys each type of part has, besides `type`.
const partKeys: Readonly<Record<string, readonly string[]>> = {
  'text-delta': ['delta'],
  'tool-call': ['id', 'name', 'arguments'],
  usage: ['inputTokens', 'outputTokens'],
  finish: ['finishReason'],
  response: ['id', 'model'],
};

// The first key of a part that its type does not have (`textDelta`, `toolCallId`: another
// library's part), or undefined.
function unknownPartKey(part: object, keys: readonly string[]): string | undefined {
  for (const key in part) if (key !== 'type' && !keys.includes(key)) return key;
  return undefined;
}

/**
 * A streamed turn, part by part. `read` each part as it comes: it returns the tool call the part
 * completes (malformed ones kept, with what was wrong in `problemAt`), and throws a
 * StreamPartError for a part that does not decode. `response()` is the turn so far.
 */
export class WrittenTurn {
  // The text so far: undefined until the first delta, as a whole response without text has none.
  private text: string | undefined = undefined;
  // The calls so far, in call order.
  private readonly toolCalls: ToolCall[] = [];
  // What was wrong with each malformed call, by position; made on the first.
  private malformed: Map<number, string> | undefined = undefined;
  private usage: Usage | undefined = undefined;
  private finishReason: FinishReason | undefined = undefined;
  // Parts read so far, to name a bad one (1-based in messages).
  private parts = 0;

  /** The number of calls so far. */
  get calls(): number {
    return this.toolCalls.length;
  }

  /** What was wrong with the call at `position`, if it was malformed. */
  problemAt(position: number): string | undefined {
    return this.malformed?.get(position);
  }

  read(raw: unknown): ToolCall | undefined {
    const n = ++this.parts;
    if (!isStreamPart(raw)) throw new StreamPartError(`stream part ${n}: expected a part (an object with type ${partTypes}), got ${describeValue(raw)}`);
    const part = raw as { readonly type: string } & Record<string, unknown>;
    const keys = Object.hasOwn(partKeys, part.type) ? partKeys[part.type] : undefined;
    if (keys === undefined) throw new StreamPartError(`stream part ${n}: unknown type ${describeValue(part.type)}; expected ${partTypes}`);
    const unknownKey = unknownPartKey(part, keys);
    if (unknownKey !== undefined) {
      throw new StreamPartError(`stream part ${n} (${part.type}).${unknownKey}: not a key of a ${part.type} part (expected ${['type', ...keys].join(', ')}), got ${describeValue(raw)}`);
    }
    switch (part.type) {
      case 'text-delta': {
        const { delta } = part;
        if (typeof delta !== 'string') throw new StreamPartError(`stream part ${n} (text-delta): delta: expected string, got ${describeValue(delta)}`);
        this.text = this.text === undefined ? delta : this.text + delta;
        return undefined;
      }
      case 'tool-call': {
        const position = this.toolCalls.length;
        // The part itself is the call (its `type` aside), checked as a call of a whole response is.
        const { call, problem } = decodeToolCall(part, position);
        this.toolCalls.push(call);
        if (problem !== undefined) (this.malformed ??= new Map()).set(position, problem);
        return call;
      }
      case 'usage': {
        const decoded = UsageCodec.decode(part);
        if (isLeft(decoded)) throw new StreamPartError(describeFailures(decoded.left, `stream part ${n} (usage)`));
        this.usage = { inputTokens: decoded.right.inputTokens, outputTokens: decoded.right.outputTokens };
        return undefined;
      }
      case 'finish': {
        const decoded = FinishReasonCodec.decode(part.finishReason);
        if (isLeft(decoded)) throw new StreamPartError(describeFailures(decoded.left, `stream part ${n} (finish).finishReason`));
        this.finishReason = decoded.right;
        return undefined;
      }
      case 'response': {
        // Which response this is: read by tracing from the part itself; the turn is the same without it.
        const { id, model } = part;
        if (id !== undefined && typeof id !== 'string') throw new StreamPartError(`stream part ${n} (response): id: expected string, got ${describeValue(id)}`);
        if (model !== undefined && typeof model !== 'string') throw new StreamPartError(`stream part ${n} (response): model: expected string, got ${describeValue(model)}`);
        return undefined;
      }
      default:
        throw new StreamPartError(`stream part ${n}: unknown type ${describeValue(part.type)}; expected ${partTypes}`);
    }
  }

  /** The turn as one response: what a provider giving it whole would have sent. */
  response(): DecodedResponse {
    const { text, toolCalls, usage, finishReason, malformed } = this;
    const response: { text?: string; toolCalls?: readonly ToolCall[]; usage?: Usage; finishReason?: FinishReason } = {};
    if (text !== undefined) response.text = text;
    if (toolCalls.length > 0) response.toolCalls = [...toolCalls];
    if (usage !== undefined) response.usage = usage;
    if (finishReason !== undefined) response.finishReason = finishReason;
    return { response: response as ModelResponse, malformed: malformed ?? new Map() };
  }
}
