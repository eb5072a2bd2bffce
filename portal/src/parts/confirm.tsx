import type { ComponentChildren } from 'preact';
import { useEffect, useId, useRef } from 'preact/hooks';

/**
 * An inline confirmation: the question, what will happen, and two buttons. Focus moves to it when it
 * opens so a keyboard or screen-reader user lands on the question, and Cancel is never the default.
 */
export function Confirm(props: { title: string; children: ComponentChildren; confirmLabel: string; busy?: boolean; danger?: boolean; onConfirm: () => void; onCancel: () => void }) {
  const heading = useRef<HTMLHeadingElement>(null);
  // Several confirmations may be open on one page (disable, secret, delete): each needs its own id.
  const titleId = useId();
  useEffect(() => heading.current?.focus(), []);
  return (
    <div class={`confirm${props.danger ? ' danger' : ''}`} role="group" aria-labelledby={titleId}>
      <h3 id={titleId} tabIndex={-1} ref={heading}>{props.title}</h3>
      {props.children}
      <div class="actions">
        <button type="button" onClick={props.onConfirm} disabled={props.busy}>{props.confirmLabel}</button>
        <button type="button" class="secondary" onClick={props.onCancel} disabled={props.busy}>Cancel</button>
      </div>
    </div>
  );
}
