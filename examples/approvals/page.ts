// The approvals page's script, bundled for the browser by the server (esbuild): a chat on the AI
// SDK's UI state, each tool part drawn with its state, an Approve and a Refuse button on a part
// that asks for approval. Written against the few DOM calls it makes (the project compiles
// without the DOM's types).
import { ApprovalsChat } from './chat.js';

interface Element {
  innerHTML: string;
  textContent: string | null;
  dataset: Record<string, string | undefined>;
  querySelector(selector: string): Element | null;
  addEventListener(type: string, listener: (event: { target: unknown }) => void): void;
  closest?(selector: string): Element | null;
}
const { document } = globalThis as unknown as { document: { querySelector(selector: string): Element } };

const escape = (text: string): string => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
const root = document.querySelector('#chat');
const status = document.querySelector('#status');

function render(): void {
  status.dataset['state'] = chat.status;
  status.textContent = chat.error === undefined ? chat.status : `error: ${chat.error.message}`;
  root.innerHTML = chat.messages
    .map((message) => {
      const parts = message.parts
        .map((part) => {
          if (part.type === 'text') return `<p class="text">${escape(part.text)}</p>`;
          if (!part.type.startsWith('tool-')) return '';
          const tool = part as unknown as { type: string; toolCallId: string; state: string; input?: unknown; output?: unknown; errorText?: string; approval?: { id: string; reason?: string } };
          const asked = tool.state === 'approval-requested' && tool.approval !== undefined;
          const denied = `not approved${tool.approval?.reason === undefined ? '' : `: ${tool.approval.reason}`}`;
          const shown =
            tool.state === 'output-available' ? JSON.stringify(tool.output) : tool.state === 'output-error' ? (tool.errorText ?? '') : tool.state === 'output-denied' ? denied : JSON.stringify(tool.input ?? {});
          const buttons = asked ? `<button class="approve" data-id="${escape(tool.approval!.id)}">Approve</button><button class="refuse" data-id="${escape(tool.approval!.id)}">Refuse</button>` : '';
          return `<div class="tool" data-call-id="${escape(tool.toolCallId)}" data-state="${escape(tool.state)}"><b>${escape(tool.type.slice(5))}</b> <span class="shown">${escape(shown)}</span> ${buttons}</div>`;
        })
        .join('');
      return `<div class="message ${message.role}">${parts}</div>`;
    })
    .join('');
}

const chat = new ApprovalsChat('/api/chat', render);
root.addEventListener('click', (event) => {
  const button = event.target as Element;
  const id = button.dataset?.['id'];
  if (id === undefined) return;
  const approved = button.textContent === 'Approve';
  void chat.addToolApprovalResponse(approved ? { id, approved } : { id, approved, reason: 'refused on the page' });
});
render();
void chat.sendMessage({ text: 'Book room 7 for tonight' });
