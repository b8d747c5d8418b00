/**
 * Who is here: each page says which cell it is on in its notebooks' rooms (the awareness field
 * `ferryCell`, a cell id; the gateway relays it for a link's visitors too), and the Collaboration
 * panel's "Online collaborators" lists the people in the open notebooks' rooms (owner and guests
 * alike): their colour, their name, whether they are the owner, and the cell they are on. The stock
 * list read only the global awareness room, which a link's visitors never join, so guests were
 * never in it.
 */
import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { INotebookTracker, type NotebookPanel } from '@jupyterlab/notebook';
import {
  ITranslator,
  nullTranslator,
  type TranslationBundle
} from '@jupyterlab/translation';
import type { SidePanel } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';
import type { Awareness } from 'y-protocols/awareness';
import { currentShare } from './visitor';

/** The awareness field that holds the id of the cell a page is on. */
export const CELL_FIELD = 'ferryCell';

/** The id of JupyterLab's Collaboration side panel (@jupyter/collaboration-extension). */
const COLLABORATION_PANEL = 'jp-collaboration-panel';

/** One person in one notebook, as the list shows them. */
export interface IPresent {
  clientId: number;
  name: string;
  initials: string;
  color: string;
  /** 0-based index of the cell they are on; undefined: none (or not yet said). */
  cell?: number;
  /** The notebook's owner (not a guest). */
  owner: boolean;
  /** This person's other tab. */
  self: boolean;
}

/** The awareness of a notebook's room, when it has one. */
function awarenessOf(panel: NotebookPanel): Awareness | undefined {
  return (panel.context.model?.sharedModel as { awareness?: Awareness })
    ?.awareness;
}

/** The people in `panel`'s room other than this page, one entry per person. */
export function presentIn(
  panel: NotebookPanel,
  ownerName: string | undefined,
  selfName: string | undefined
): IPresent[] {
  const awareness = awarenessOf(panel);
  if (!awareness) {
    return [];
  }
  const cells = panel.content.widgets.map(cell => cell.model.id);
  const people = new Map<string, IPresent>();
  awareness.getStates().forEach((state, clientId) => {
    const user = state.user as
      | {
          username?: string;
          name?: string;
          display_name?: string;
          initials?: string;
          color?: string;
        }
      | undefined;
    if (clientId === awareness.clientID || !user?.username) {
      return;
    }
    const cellId = state[CELL_FIELD];
    const index = typeof cellId === 'string' ? cells.indexOf(cellId) : -1;
    const name = user.display_name || user.name || user.username;
    const present: IPresent = {
      clientId,
      name,
      initials: user.initials || name.slice(0, 1).toUpperCase(),
      color: user.color || 'var(--jp-layout-color3)',
      cell: index >= 0 ? index : undefined,
      owner: ownerName !== undefined && name === ownerName,
      self: selfName !== undefined && user.username === selfName
    };
    const known = people.get(user.username);
    if (!known || (known.cell === undefined && present.cell !== undefined)) {
      people.set(user.username, present);
    }
  });
  return [...people.values()].sort((a, b) =>
    a.owner !== b.owner ? (a.owner ? -1 : 1) : a.name.localeCompare(b.name)
  );
}

/** "Online collaborators": the people in each open notebook, and where they are. */
export class OnlineCollaborators extends Widget {
  constructor(
    private readonly _tracker: INotebookTracker,
    private readonly _ownerName: () => string | undefined,
    private readonly _selfName: () => string | undefined,
    private readonly _trans: TranslationBundle = nullTranslator.load('ferry')
  ) {
    super();
    this.addClass('jp-FerryPresence');
    this.title.label = _trans.__('Online collaborators');
    this.node.setAttribute('aria-live', 'polite');
    this._tracker.widgetAdded.connect((_, panel) => this._watch(panel));
    this._tracker.forEach(panel => this._watch(panel));
    this.update();
  }

  /** Draw again on the next frame (many awareness changes come together). */
  refresh(): void {
    if (!this._pending) {
      this._pending = true;
      requestAnimationFrame(() => {
        this._pending = false;
        this.update();
      });
    }
  }

  protected onUpdateRequest(): void {
    const sections: HTMLElement[] = [];
    this._tracker.forEach(panel => {
      const people = presentIn(panel, this._ownerName(), this._selfName());
      if (people.length === 0) {
        return;
      }
      const section = document.createElement('section');
      section.className = 'jp-FerryPresence-notebook';
      const heading = document.createElement('h3');
      heading.textContent = panel.context.localPath.split('/').pop() ?? '';
      heading.title = panel.context.path;
      const list = document.createElement('ul');
      list.append(...people.map(person => this._person(panel, person)));
      section.append(heading, list);
      sections.push(section);
    });
    if (sections.length === 0) {
      const empty = document.createElement('p');
      empty.className = 'jp-FerryPresence-empty';
      empty.textContent = this._trans.__(
        'Nobody else is in your open notebooks.'
      );
      sections.push(empty);
    }
    this.node.replaceChildren(...sections);
  }

  private _person(panel: NotebookPanel, person: IPresent): HTMLElement {
    const item = document.createElement('li');
    item.className = 'jp-FerryPresence-person';
    item.dataset.clientId = String(person.clientId);
    const dot = document.createElement('span');
    dot.className = 'jp-FerryPresence-avatar';
    dot.style.backgroundColor = person.color;
    dot.textContent = person.initials;
    const name = document.createElement('span');
    name.className = 'jp-FerryPresence-name';
    name.textContent = person.name;
    const role = document.createElement('span');
    role.className = 'jp-FerryPresence-role';
    role.textContent = person.self
      ? this._trans.__('you, another tab')
      : person.owner
        ? this._trans.__('owner')
        : this._trans.__('guest');
    const where = document.createElement('button');
    where.type = 'button';
    where.className = 'jp-FerryPresence-cell';
    if (person.cell === undefined) {
      where.textContent = this._trans.__('no cell selected');
      where.disabled = true;
    } else {
      const index = person.cell;
      where.textContent = this._trans.__('cell %1', index + 1);
      where.title = this._trans.__('Go to the cell %1 is on', person.name);
      where.addEventListener('click', () => {
        panel.content.activeCellIndex = index;
        void panel.content.scrollToItem(index);
        panel.activate();
      });
    }
    item.append(dot, name, role, where);
    return item;
  }

  private _watch(panel: NotebookPanel): void {
    void panel.context.ready.then(() => {
      const awareness = awarenessOf(panel);
      if (!awareness || this.isDisposed) {
        return;
      }
      const changed = () => this.refresh();
      awareness.on('change', changed);
      panel.content.model?.cells.changed.connect(changed);
      panel.disposed.connect(() => {
        awareness.off('change', changed);
        this.refresh();
      });
      this.refresh();
    });
  }

  private _pending = false;
}

/** Says in each notebook's room which cell this page is on. */
export function publishActiveCell(panel: NotebookPanel): void {
  void panel.context.ready.then(() => {
    const awareness = awarenessOf(panel);
    if (!awareness) {
      return;
    }
    const say = () =>
      awareness.setLocalStateField(
        CELL_FIELD,
        panel.content.activeCell?.model.id ?? null
      );
    panel.content.activeCellChanged.connect(say);
    say();
  });
}

/** The Collaboration panel's "Online collaborators", and each page's cell in its rooms. */
export const presencePlugin: JupyterFrontEndPlugin<void> = {
  id: '@ferry/sharing-extension:presence',
  description:
    'Lists who is in the open notebooks (owner and guests: name, colour, cell) in the Collaboration panel, and says which cell this page is on.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ITranslator],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    translator: ITranslator | null
  ): void => {
    const trans = (translator ?? nullTranslator).load('ferry');
    tracker.widgetAdded.connect((_, panel) => publishActiveCell(panel));
    tracker.forEach(publishActiveCell);
    let ownerName: string | undefined;
    const user = app.serviceManager.user;
    void currentShare(app).then(share => {
      ownerName = share ? share.sharedBy : undefined;
      list.refresh();
    });
    const list = new OnlineCollaborators(
      tracker,
      () => ownerName ?? user.identity?.name,
      () => user.identity?.username,
      trans
    );
    list.id = 'jp-ferry-online-collaborators';
    void app.restored.then(() => {
      // The stock list of the Collaboration panel reads the global room alone: ours replaces it.
      const panel = Array.from(app.shell.widgets('left')).find(
        widget => widget.id === COLLABORATION_PANEL
      ) as SidePanel | undefined;
      if (!panel) {
        return;
      }
      const stock = panel.widgets.find(
        widget =>
          widget !== list && /online collaborators/i.test(widget.title.label)
      );
      const index = stock ? panel.widgets.indexOf(stock) : panel.widgets.length;
      panel.insertWidget(index, list);
      stock?.dispose();
    });
  }
};
