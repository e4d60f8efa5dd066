/**
 * `defineRequest` / `defineNotification`: one declaration per wire message. A declaration is the
 * vscode-jsonrpc `RequestType` / `NotificationType` itself (pass it to `sendRequest`, `onRequest`,
 * …), carries the schemas of its params and result, and checks values against them with
 * validators compiled on first use. The TypeScript types come from the schemas (`ParamsOf`,
 * `ResultOf`), so a message's shape is written once.
 *
 * Who checks what: the receiver checks params, the requester checks the result, and the side
 * that answers checks its own result before sending it (a daemon bug is then an error of the
 * daemon's, not a payload the client refuses). See client/rpc-channel.ts and
 * daemon/connection/client-connection.ts.
 */
import { jsonrpc } from './jsonrpc-runtime.js';
import { SubagentError, type SubagentErrorData } from './errors.js';
import type { Schema } from './json-schema.js';
import { lazyValidator, type ValidationFailure, type Validator } from './validation.js';

/** A value read against a declaration: typed when it passed, else why it failed. */
export type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly failure: ValidationFailure };

/** The one place a checked value takes its declared type. */
function reader<T>(validate: Validator): (value: unknown) => Checked<T> {
  return (value) => {
    const failure = validate(value);
    return failure ? { ok: false, failure } : { ok: true, value: value as T };
  };
}

export class WireRequest<P, R> extends jsonrpc.RequestType<P, R, SubagentErrorData> {
  readonly checkParams: Validator;
  readonly checkResult: Validator;
  readonly readParams: (value: unknown) => Checked<P>;
  readonly readResult: (value: unknown) => Checked<R>;
  constructor(
    method: string,
    readonly params: Schema<P>,
    readonly result: Schema<R>,
  ) {
    super(method);
    this.checkParams = lazyValidator(params);
    this.checkResult = lazyValidator(result);
    this.readParams = reader(this.checkParams);
    this.readResult = reader(this.checkResult);
  }
}

export class WireNotification<P> extends jsonrpc.NotificationType<P> {
  readonly checkParams: Validator;
  readonly readParams: (value: unknown) => Checked<P>;
  constructor(
    method: string,
    readonly params: Schema<P>,
  ) {
    super(method);
    this.checkParams = lazyValidator(params);
    this.readParams = reader(this.checkParams);
  }
}

export const defineRequest = <P, R>(method: string, params: Schema<P>, result: Schema<R>): WireRequest<P, R> =>
  new WireRequest(method, params, result);

export const defineNotification = <P>(method: string, params: Schema<P>): WireNotification<P> => new WireNotification(method, params);

export type ParamsOf<T> = T extends WireRequest<infer P, unknown> ? P : T extends WireNotification<infer P> ? P : never;
export type ResultOf<T> = T extends WireRequest<unknown, infer R> ? R : never;

/** The error for params that fail their declaration: the same whichever side checked them. */
export const invalidParams = (method: string, failure: ValidationFailure): SubagentError =>
  new SubagentError('INVALID_REQUEST', `invalid params for ${method}: ${failure.message}`, { field: failure.field });
