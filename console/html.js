// htm turns tagged templates into Preact elements, so the console needs no JSX and no build step.
import { h } from 'preact';
import htm from 'htm';

export const html = htm.bind(h);
