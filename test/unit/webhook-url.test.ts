import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEMO_CONFIG_FILE, loadConfig, readConfigFile } from '../../src/config.js';
import { startService } from '../../src/main.js';
import { WEBHOOK_URL_LENGTH_MAX, webhookUrlProblem } from '../../src/domain/events/webhooks/webhook-url.js';

describe('webhook URL', () => {
  it.each([
    'https://hooks.example.com/payorch',
    'http://127.0.0.1:8080/hooks?source=payorch',
    'https://xn--exmple-cua.com/hooks',
    'https://hooks.example.com:443/x',
    'http://[::1]:9000/',
  ])('accepts %s', (url) => {
    expect(webhookUrlProblem(url)).toBeUndefined();
  });

  it.each([
    ['javascript:', 'javascript:alert(1)', /http or https/],
    ['file:', 'file:///etc/passwd', /http or https/],
    ['ftp:', 'ftp://files.example.com/', /http or https/],
    ['credentials', 'https://user:pass@hooks.example.com/', /credentials/],
    ['a user alone', 'https://user@hooks.example.com/', /credentials/],
    ['a space', 'https://hooks.example.com/a b', /ASCII/],
    ['a leading space', ' https://hooks.example.com/', /ASCII/],
    ['a tab', 'https://hooks.example.com/\t', /ASCII/],
    ['a Cyrillic look-alike letter', 'https://exаmple.com/hooks', /punycode/],
    ['a full-width dot', 'https://example。com/', /punycode/],
    ['a backslash', 'https:\\\\hooks.example.com/', /backslash/],
    ['no slashes', 'https:hooks.example.com/', /start with/],
    ['a percent-encoded host', 'https://ex%61mple.com/', /host as it is dialled/],
    ['a decimal IPv4 host', 'http://2130706433/', /host as it is dialled \(127\.0\.0\.1\)/],
    ['a fragment', 'https://hooks.example.com/#x', /fragment/],
    ['a relative path', '/hooks', /absolute URL/],
    ['an overlong URL', `https://hooks.example.com/${'a'.repeat(WEBHOOK_URL_LENGTH_MAX)}`, /at most 2048/],
  ])('refuses %s', (_, url, problem) => {
    expect(webhookUrlProblem(url)).toMatch(problem);
  });

  it('stops a start on a CONFIG_FILE key whose webhook URL is refused, naming the key and the field', async () => {
    const file = readConfigFile(DEMO_CONFIG_FILE);
    const [first, ...rest] = file.serviceKeys;
    if (first === undefined) throw new Error('the demo config has service keys');
    const broken = { ...file, serviceKeys: [{ ...first, permissions: { ...first.permissions, webhook: { url: 'file:///x' } } }, ...rest] };
    const path = join(mkdtempSync(join(tmpdir(), 'payorch-webhook-')), 'config.json');
    writeFileSync(path, JSON.stringify(broken));
    // The check runs before the database is opened, so the refused start leaves nothing behind.
    const start = startService(loadConfig({ CONFIG_FILE: path }));
    await expect(start).rejects.toThrow(ConfigError);
    await expect(start).rejects.toThrow(`${first.serviceId} permissions.webhook.url: must be an http or https URL`);
  });
});
