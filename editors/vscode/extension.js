// The VS Code side of planc: starts `planc lsp` (the `planc.command` setting) for `*.kd`
// files and passes it the `planc.*` settings, at start and whenever they change.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function settings() {
  const c = vscode.workspace.getConfiguration("planc");
  return { planc: { model: c.get("model") || "", devices: c.get("devices") } };
}

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("planc").get("command");
  const server = { command, args, transport: TransportKind.stdio };
  client = new LanguageClient("planc", "planc", server, {
    documentSelector: [{ scheme: "file", language: "planc" }],
    initializationOptions: settings(),
    synchronize: { configurationSection: "planc" },
  });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
