/**
 * A share (a link, or a grant to people) as its owner lists it: its notebook's path within the
 * owner's space, and who is connected through it now (kernel channels, and room sockets), each by
 * name, with the earliest time they connected. The links' routes and the people's routes answer it.
 */
import type { IShare, IShareRooms, ShareConnections } from '../../auth';
import type { RestSchemas } from '../../protocol';
import type { ISpace, UserSpaces } from '../../users';

/** What the owner's view of a share needs. */
export interface IShareModelOptions {
  spaces: UserSpaces;
  /** The sockets open through each share. */
  connections: ShareConnections;
  /** The rooms, for who is connected through each share. */
  rooms: IShareRooms;
}

/** `share` as its owner, whose space is `space`, sees it. */
export function shareModel(
  share: IShare,
  space: ISpace,
  options: IShareModelOptions
): RestSchemas['Share'] {
  const visitors = new Map<string, string>();
  const add = (name: string, since: string) => {
    const known = visitors.get(name);
    if (known === undefined || since < known) {
      visitors.set(name, since);
    }
  };
  for (const visitor of options.connections.visitors(share.id)) {
    add(visitor.name, visitor.since);
  }
  for (const visitor of options.rooms.visitors(share.id)) {
    add(visitor.name, new Date(visitor.since).toISOString());
  }
  return {
    ...share,
    path: share.path === null ? null : options.spaces.toUser(space, share.path),
    visitors: [...visitors].map(([name, since]) => ({ name, since }))
  };
}
