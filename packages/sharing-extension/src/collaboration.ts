/**
 * The collaboration client: notebooks and text files open in a room of Ferry's gateway
 * (`PUT /api/collaboration/session/{path}`, then the websocket `/api/collaboration/room/...`), as
 * jupyter-collaboration's docprovider-extension does it, with @jupyter/docprovider's content
 * provider and websocket providers. Left out: forks, the timeline slider and the conflict diff
 * view (their server endpoints are not Ferry's).
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import type { ContentsManager } from '@jupyterlab/services';
import { IDocumentManager } from '@jupyterlab/docmanager';
import {
  IEditorWidgetFactory,
  type FileEditorFactory
} from '@jupyterlab/fileeditor';
import {
  INotebookWidgetFactory,
  type NotebookWidgetFactory
} from '@jupyterlab/notebook';
import { ITranslator } from '@jupyterlab/translation';
import {
  ICollaborativeContentProvider,
  IGlobalAwareness
} from '@jupyter/collaborative-drive';
import {
  type IAwarenessProvider,
  IAwarenessProviderFactory,
  IDocumentProviderFactory,
  RtcContentProvider,
  WebSocketAwarenessProvider,
  WebSocketProvider
} from '@jupyter/docprovider';
import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { YFile, YNotebook } from '@jupyter/ydoc';
import type { Awareness } from 'y-protocols/awareness';
import type * as Y from 'yjs';
import { mayEdit, type ShareScope } from './api';
import { trustPlugin, watchTrust } from './trust';
import { showLinkEnded } from './visitor';

/** The id under which documents ask for the room-backed content provider. */
export const RTC_PROVIDER_ID = 'rtc';

/** The close code the gateway ends a share link's sockets with when the link is revoked or expires. */
const LINK_ENDED = 4403;

/**
 * Stops a provider from reconnecting once the gateway says its share link ended, and says so over
 * the whole page: a revoked link would otherwise be retried forever, in silence.
 */
function endOnRevoke(provider: WebSocketProvider): WebSocketProvider {
  // (A document that never synced has no socket to watch: its load dialog says enough.)
  provider.ready.then(
    () => {
      const socket = provider.wsProvider;
      socket?.on('connection-close', (event: CloseEvent | null) => {
        if (event?.code !== LINK_ENDED) {
          return;
        }
        socket.disconnect();
        showLinkEnded(event.reason);
      });
    },
    () => undefined
  );
  return provider;
}

/** The websocket provider of one document's room. */
const documentProviderFactory: JupyterFrontEndPlugin<IDocumentProviderFactory> =
  {
    id: '@ferry/sharing-extension:document-provider-factory',
    description:
      "Connects a document to its room on Ferry's gateway (y-websocket sync and awareness).",
    autoStart: true,
    provides: IDocumentProviderFactory,
    requires: [ITranslator],
    activate: (
      app: JupyterFrontEnd,
      translator: ITranslator
    ): IDocumentProviderFactory => {
      const trans = translator.load('jupyter_collaboration');
      return {
        create: options =>
          watchTrust(
            endOnRevoke(
              new WebSocketProvider({
                path: options.path,
                contentType: options.contentType,
                format: options.format,
                model: options.model,
                user: options.user,
                translator: trans,
                serverSettings: options.serverSettings,
                onConflictSaveAs: () =>
                  app.commands.execute('docmanager:save-as') as Promise<void>,
                onConflictRevert: () =>
                  app.commands.execute('docmanager:reload') as Promise<void>
              })
            ),
            options.model
          )
      };
    }
  };

/** The websocket provider of the global awareness room (who is online, what they have open). */
const awarenessProviderFactory: JupyterFrontEndPlugin<IAwarenessProviderFactory> =
  {
    id: '@ferry/sharing-extension:awareness-provider-factory',
    description: 'Connects the global awareness to its room on the gateway.',
    autoStart: true,
    provides: IAwarenessProviderFactory,
    activate: (): IAwarenessProviderFactory => ({
      create: options =>
        // A link's visitor sees the people in its notebook, not what the owner has open elsewhere:
        // the gateway keeps the global room from links, so their page does not knock on it.
        PageConfig.getOption('ferryShare')
          ? new LocalAwareness(options.awareness)
          : new WebSocketAwarenessProvider({
              url: URLExt.join(
                options.serverSettings.wsUrl,
                'api/collaboration/room'
              ),
              roomID: options.roomID,
              awareness: options.awareness,
              user: options.user
            })
    })
  };

/** An awareness that stays in the page. */
class LocalAwareness implements IAwarenessProvider {
  constructor(readonly awareness: IAwarenessProvider['awareness']) {}

  get isDisposed(): boolean {
    return this._disposed;
  }

  dispose(): void {
    this._disposed = true;
  }

  private _disposed = false;
}

/** The content provider that opens documents in rooms instead of reading them over REST. */
const contentProvider: JupyterFrontEndPlugin<ICollaborativeContentProvider> = {
  id: '@ferry/sharing-extension:content-provider',
  description:
    'Opens notebooks and text files in rooms of the gateway: edits, cursors and outputs are shared.',
  autoStart: true,
  provides: ICollaborativeContentProvider,
  requires: [ITranslator, IDocumentProviderFactory],
  optional: [IGlobalAwareness, IDocumentManager],
  activate: (
    app: JupyterFrontEnd,
    translator: ITranslator,
    providerFactory: IDocumentProviderFactory,
    globalAwareness: Awareness | null,
    documentManager: IDocumentManager | null
  ): ICollaborativeContentProvider => {
    const drive = (app.serviceManager.contents as ContentsManager).defaultDrive;
    const registry = drive.contentProviderRegistry;
    if (!registry) {
      throw new Error('The default drive has no content provider registry');
    }
    const provider = new RtcContentProvider({
      currentDrive: drive,
      serverSettings: drive.serverSettings,
      user: app.serviceManager.user,
      trans: translator.load('jupyter_collaboration'),
      globalAwareness,
      documentManager,
      fileChanged: drive.fileChanged,
      providerFactory
    });
    registry.register(RTC_PROVIDER_ID, provider);
    return provider;
  }
};

/** Notebooks open in rooms (`json:notebook:<fileId>`). */
const notebooks: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:ynotebook',
  description: 'Opens notebooks in their room.',
  autoStart: true,
  requires: [ICollaborativeContentProvider, INotebookWidgetFactory],
  activate: (
    _app: JupyterFrontEnd,
    provider: ICollaborativeContentProvider,
    factory: NotebookWidgetFactory.IFactory
  ): void => {
    const share = Private.pageShare();
    const readOnly = share !== undefined && !mayEdit(share.scope);
    provider.sharedModelFactory.registerDocumentFactory('notebook', () => {
      const model = new YNotebook({ disableDocumentWideUndoRedo: true });
      if (readOnly) {
        keepStateLocal(model.ydoc);
      }
      return model;
    });
    factory.contentProviderId = RTC_PROVIDER_ID;
  }
};

/**
 * Keeps a doc's `state` map (JupyterLab's `dirty` and `document_id` bookkeeping) in this page: a
 * link below edit writes no shared state, and the gateway refuses its updates that try (a refused
 * update would leave a gap that refuses the comments written after it).
 */
export function keepStateLocal(doc: Y.Doc): void {
  const state = doc.getMap<unknown>('state');
  const local = new Map<string, unknown>();
  const shared = state.get.bind(state);
  state.set = <V>(key: string, value: V): V => {
    local.set(key, value);
    return value;
  };
  state.get = (key: string) => (local.has(key) ? local.get(key) : shared(key));
}

/** Text files open in rooms (`text:file:<fileId>`). */
const files: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:yfile',
  description: 'Opens text files in their room.',
  autoStart: true,
  requires: [ICollaborativeContentProvider, IEditorWidgetFactory],
  activate: (
    _app: JupyterFrontEnd,
    provider: ICollaborativeContentProvider,
    factory: FileEditorFactory.IFactory
  ): void => {
    provider.sharedModelFactory.registerDocumentFactory(
      'file',
      () => new YFile()
    );
    factory.contentProviderId = RTC_PROVIDER_ID;
  }
};

/** The plugins of the collaboration client. */
export const collaborationPlugins: JupyterFrontEndPlugin<unknown>[] = [
  documentProviderFactory,
  awarenessProviderFactory,
  contentProvider,
  notebooks,
  files,
  trustPlugin
];

namespace Private {
  /** The link this page was opened with, as the gateway put it in the page config. */
  export function pageShare(): { scope: ShareScope } | undefined {
    const raw = PageConfig.getOption('ferryShare');
    if (!raw) {
      return undefined;
    }
    try {
      return JSON.parse(raw) as { scope: ShareScope };
    } catch {
      return undefined;
    }
  }
}
