import 'uplot/dist/uPlot.min.css';
import '@ferry/style/index.js';
