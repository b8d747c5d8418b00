/*
 * The style module of @ferry/style (what a JupyterLab build imports): the same files as index.css.
 */
import './variables.css';
import './status.css';
import './picker.css';
import './sidebar.css';
import './dashboard.css';
import './sharing.css';
import './jobs.css';
import './tokens.css';
import './admin.css';
