/**
 * The client's Server-Sent Events reader against the cases eventsource-parser (the reference
 * parser the issue names) is tested with: line endings, split CRLF, `id`, `retry`, multi-line
 * data, comments, a field without colon, byte-order marks, unterminated blocks. The client takes
 * no dependency for this, so these cases are what holds it to the HTML standard.
 */
import { createEventStreamParser, EVENT_CHARS_MAX, type ServerSentEvent, serverSentEvents } from '@payorch/client';
import { describe, expect, it } from 'vitest';

/** Every chunk fed in order; the events they dispatch, in order. */
function parse(...chunks: string[]): ServerSentEvent[] {
  const parser = createEventStreamParser();
  return chunks.flatMap((chunk) => parser.feed(chunk));
}

const messages = (...data: string[]) => data.map((value) => ({ event: 'message', data: value, lastEventId: '' }));

function byteStream(chunks: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

async function collect(body: ReadableStream<Uint8Array>): Promise<ServerSentEvent[]> {
  const events: ServerSentEvent[] = [];
  for await (const event of serverSentEvents(body)) events.push(event);
  return events;
}

describe('line endings', () => {
  it('LF, CR and CRLF end lines alike, also mixed in one stream', () => {
    const expected = messages('dog\nbark', 'cat\nmeow');
    expect(parse('data: dog\n', 'data: bark\n\n', 'data: cat\n', 'data: meow\n\n')).toEqual(expected);
    expect(parse('data: dog\r', 'data: bark\r\r', 'data: cat\r', 'data: meow\r\r')).toEqual(expected);
    expect(parse('data: dog\r\n', 'data: bark\r\n\r\n', 'data: cat\r\n', 'data: meow\r\n\r\n')).toEqual(expected);
    expect(parse('data: dog\r\ndata: bark\r\rdata: cat\ndata: meow\n\r\n')).toEqual(expected);
  });

  it('a CRLF split across chunks is one line end, not an empty line', () => {
    expect(parse('data: A\r\n', 'data: B\r', '\n', 'data: C\r\n', '\n')).toEqual(messages('A\nB\nC'));
    // An empty chunk between the CR and its LF changes nothing.
    expect(parse('data: A\r', '', '\n', 'data: B\r\n\r\n')).toEqual(messages('A\nB'));
  });

  it('any chunking of a stream gives the same events', () => {
    const stream = 'id: 7\r\nevent: status\r\ndata: {"a":1}\r\n\r\n: beat\r\rdata: x\ndata: y\n\n';
    const whole = parse(stream);
    expect(whole).toHaveLength(2);
    for (let cut = 1; cut < stream.length; cut++) expect(parse(stream.slice(0, cut), stream.slice(cut))).toEqual(whole);
    expect(parse(...stream.split(''))).toEqual(whole);
  });
});

describe('fields', () => {
  it('multi-line data joins with LF; one space after the colon is dropped, a second one kept', () => {
    expect(parse('event: stock\ndata: YHOO\ndata: +2\ndata: 10\n\n')).toEqual([{ event: 'stock', data: 'YHOO\n+2\n10', lastEventId: '' }]);
    expect(parse('data:no space\ndata:  two spaces\n\n')).toEqual(messages('no space\n two spaces'));
  });

  it('a field without colon has an empty value: `data` alone adds an empty line', () => {
    expect(parse('data:\n\n', 'data\ndata\n\n', 'data:test\n\n')).toEqual(messages('', '\n', 'test'));
  });

  it('unknown fields and lines of text are ignored; a line starting with a space is not a field', () => {
    expect(parse('data:abc\n data\ndata\nfoobar:xxx\njustsometext\n:comment\ndata:123\n\n')).toEqual(messages('abc\n\n123'));
  });

  it('an empty `event` means message; a block without data dispatches nothing and forgets its event name', () => {
    expect(parse('event:\ndata: Hello 1\n\n', 'event: lonely\n\n', 'data: after\n\n')).toEqual(messages('Hello 1', 'after'));
  });

  it('`id` carries over to later events, an empty one clears it, one holding NUL is ignored', () => {
    expect(parse('id: 1337\nevent: tick\ndata: a\n\n', 'data: b\n\n', 'id: 123\nid: bad\0id\ndata: c\n\n', 'id\ndata: d\n\n')).toEqual([
      { event: 'tick', data: 'a', lastEventId: '1337' },
      { event: 'message', data: 'b', lastEventId: '1337' },
      { event: 'message', data: 'c', lastEventId: '123' },
      { event: 'message', data: 'd', lastEventId: '' },
    ]);
    // An id in a block without data still counts for the events after it.
    expect(parse('id: 42\n\n', 'data: e\n\n')).toEqual([{ event: 'message', data: 'e', lastEventId: '42' }]);
  });

  it('`retry` is taken when it is all digits and ignored otherwise', () => {
    const parser = createEventStreamParser();
    expect(parser.retryMs).toBeUndefined();
    expect(parser.feed('retry: 1000\nretry: 2000x\ndata: x\n\n')).toEqual(messages('x'));
    expect(parser.retryMs).toBe(1000);
    parser.feed('retry:\n\nretry: 50x\n\nretry: -5\n\n');
    expect(parser.retryMs).toBe(1000);
    parser.feed('retry: 500\n\n');
    expect(parser.retryMs).toBe(500);
  });
});

describe('comments, byte-order marks and the end of the stream', () => {
  it('comments of any length and content are skipped, also between the lines of one event', () => {
    expect(parse(': hello\n\n', ':'.repeat(300), '\n', 'data: First\n\n', ': Первый', ': 第二\n', 'data: Second\n\n')).toEqual(
      messages('First', 'Second'),
    );
    const long = 'x'.repeat(2 * 1024 + 1);
    expect(parse('data:1\r\r:\0\n:\r\ndata:2\n\n:', long, '\rdata:3\n\n:data:fail\r:', long, '\ndata:4\n\n', 'data:5')).toEqual(
      messages('1', '2', '3', '4'),
    );
  });

  it('a block that is never ended by an empty line is not dispatched', () => {
    expect(parse('data: complete\n\ndata: cut off\n')).toEqual(messages('complete'));
  });

  it('a byte-order mark at the start is skipped, one further on spoils its line', () => {
    expect(parse('\uFEFFdata: bomful 1\n\n', '\uFEFFdata: bomful 2\n\n', 'data: bomless 3\n\n')).toEqual(messages('bomful 1', 'bomless 3'));
  });

  it('from bytes: the UTF-8 BOM is dropped and a character split across chunks is decoded whole', async () => {
    const bytes = new TextEncoder().encode('data: 我現在 ✔\r\n\r\n');
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, ...bytes]);
    // Cut inside the three bytes of 我 and inside the CRLF.
    const chunks = [withBom.slice(0, 10), withBom.slice(10, withBom.length - 3), withBom.slice(withBom.length - 3)];
    expect(await collect(byteStream(chunks))).toEqual(messages('我現在 ✔'));
  });

  it('an event past the size bound ends the stream with an error instead of growing without bound', async () => {
    const huge = new TextEncoder().encode(`data: ${'x'.repeat(EVENT_CHARS_MAX)}`);
    await expect(collect(byteStream([huge]))).rejects.toThrow(/exceeds/);
  });
});
