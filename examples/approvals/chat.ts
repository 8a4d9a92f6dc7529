// A chat on the AI SDK's own UI state (`AbstractChat` from `ai`), with the plainest state there
// is: an array, and a callback told of every change. The approvals page renders it in a browser;
// the specs drive it in Node. Approving is the SDK's `addToolApprovalResponse`; the answers go to
// the server on their own once every approval of the last message is answered.
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, type ChatState, type ChatStatus, type UIMessage } from 'ai';

class ArrayState implements ChatState<UIMessage> {
  private current: ChatStatus = 'ready';
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  constructor(private readonly changed: () => void) {}
  // The chat sets its status here: a change is drawn as any other.
  get status(): ChatStatus {
    return this.current;
  }
  set status(status: ChatStatus) {
    this.current = status;
    this.changed();
  }
  pushMessage = (message: UIMessage): void => {
    this.messages = [...this.messages, message];
    this.changed();
  };
  popMessage = (): void => {
    this.messages = this.messages.slice(0, -1);
    this.changed();
  };
  replaceMessage = (index: number, message: UIMessage): void => {
    this.messages = this.messages.map((m, i) => (i === index ? message : m));
    this.changed();
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

/** A chat that posts to `api` and tells `changed` whenever its messages or status change. */
export class ApprovalsChat extends AbstractChat<UIMessage> {
  constructor(api: string, changed: () => void = () => undefined, headers?: Record<string, string>) {
    super({
      state: new ArrayState(changed),
      transport: new DefaultChatTransport<UIMessage>({ api, ...(headers ? { headers } : {}) }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onError: () => changed(),
    });
  }
}
