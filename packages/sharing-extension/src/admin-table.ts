/**
 * The admin page's tables, as plain DOM: a header row, a row of text or elements, a list.
 */

/** A table's header row. */
export function headerRow(titles: string[]): HTMLTableRowElement {
  const row = document.createElement('tr');
  for (const title of titles) {
    const cell = document.createElement('th');
    cell.textContent = title;
    row.append(cell);
  }
  return row;
}

/** A table row of text or elements. */
export function tableRow(cells: (string | HTMLElement)[]): HTMLTableRowElement {
  const item = document.createElement('tr');
  for (const content of cells) {
    const cell = document.createElement('td');
    cell.append(content);
    item.append(cell);
  }
  return item;
}

/** A list of items (nothing when there are none). */
export function itemList(items: HTMLElement[]): HTMLElement {
  const list = document.createElement('ul');
  list.className = 'jp-FerryAdmin-list';
  list.append(...items);
  return list;
}
